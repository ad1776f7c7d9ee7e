"""routing="worst_case": an eager top-1 MoE's data-dependent rows at their shape bound."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from torchscan_stages.measure.memory import measure_peak_memory
from torchscan_stages.predict import predict_peak_memory
from torchscan_stages.predict.routing import WORST_CASE_METHOD

T, D, H, E = 64, 32, 128, 4  # tokens, width, expert hidden width, experts


class TopOneMoE(nn.Module):
    """Switch-style routing in an eager loop: each expert's rows come from ``nonzero``."""

    def __init__(self, boolean_index: bool = False) -> None:
        super().__init__()
        self.boolean_index = boolean_index
        self.router = nn.Linear(D, E, bias=False)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(D, H, bias=False), nn.ReLU(), nn.Linear(H, D, bias=False))
            for _ in range(E)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        choice = self.router(x).argmax(-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            if self.boolean_index:  # x[mask]: the same bound through aten.index
                mask = choice == e
                out[mask] = expert(x[mask])
                continue
            rows = (choice == e).nonzero().squeeze(1)
            out.index_add_(0, rows, expert(x[rows]))
        return out


def _step(model: nn.Module, x: torch.Tensor) -> Callable[[], Any]:
    def step() -> None:
        with torch.no_grad():
            model(x)

    return step


def _all_to_expert_0() -> TopOneMoE:
    """x >= 0 and only the router's first row nonzero: every token picks expert 0, the
    routing that reaches the bound for expert 0 (the others get 0 rows)."""
    model = TopOneMoE()
    with torch.no_grad():
        model.router.weight.zero_()
        model.router.weight[0] = 1.0
    return model


def test_worst_case_routing_predicts_the_shape_bound() -> None:
    torch.manual_seed(0)
    x = torch.rand(T, D)
    model = _all_to_expert_0()
    exact = predict_peak_memory(_step(model, x), device="cpu")
    assert exact.peak.status == "partial"  # nonzero's rows depend on the router's values
    assert any(d.operator == "aten.nonzero.default" for d in exact.diagnostics)

    worst = predict_peak_memory(_step(model, x), device="cpu", routing="worst_case")
    assert worst.peak.status == "complete"
    # closed form, bytes live in one expert's call at the bound of T rows (fp32, int64):
    # choice 8T + out 4TD + rows 8T + x[rows] 4TD + the expert's hidden and ReLU 2 x 4TH
    closed = 8 * T + 4 * T * D + 8 * T + 4 * T * D + 2 * 4 * T * H
    assert worst.peak.value == closed == 82_944
    # the real run whose routing reaches the bound (all tokens to expert 0) measures it
    assert _measured(_step(model, x)) == closed
    # every figure carries the worst-case method, none the exact prediction's
    results = [worst.peak, *worst.by_category.values(), *worst.by_module.values()]
    assert {r.method for r in results} == {WORST_CASE_METHOD}
    assert exact.peak.method != WORST_CASE_METHOD
    note = next(d for d in worst.diagnostics if d.code == "worst_case_routing")
    assert "aten.nonzero.default x4" in note.message  # one per expert


def test_a_balanced_routing_stays_under_the_bound_and_boolean_masks_are_bounded() -> None:
    torch.manual_seed(0)
    x = torch.randn(T, D)
    model = TopOneMoE()
    worst = predict_peak_memory(_step(model, x), device="cpu", routing="worst_case")
    assert worst.peak.value == 82_944  # the same bound: it depends on shapes alone
    measured = _measured(_step(model, x))
    assert 0 < measured < worst.peak.value  # random routing splits the tokens
    masked = TopOneMoE(boolean_index=True)
    bounded = predict_peak_memory(_step(masked, x), device="cpu", routing="worst_case")
    assert bounded.peak.status == "complete"
    assert _measured(_step(masked, x)) <= bounded.peak.value  # type: ignore[operator]


def test_static_routing_is_the_exact_figure_under_the_worst_case_method() -> None:
    step = _step(nn.Linear(D, D), torch.randn(T, D))
    exact = predict_peak_memory(step, device="cpu")
    worst = predict_peak_memory(step, device="cpu", routing="worst_case")
    assert worst.peak.value == exact.peak.value == 4 * T * D  # the output only
    assert worst.peak.method == WORST_CASE_METHOD != exact.peak.method


def test_an_unknown_routing_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="routing must be one of"):
        predict_peak_memory(lambda: None, routing="best_case")


def _measured(workload: Callable[[], Any]) -> int:
    return int(measure_peak_memory(workload).memory.results[0].value)  # type: ignore[union-attr]
