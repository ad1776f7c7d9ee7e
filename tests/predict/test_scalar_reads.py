"""A scalar read no allocation depends on does not stop the prediction.

Each step is predicted and measured with ``measure_peak_memory`` on the same callable
(model and optimizer built outside, one real step first so the state exists). Before this,
every one of the first four stopped at ``aten._local_scalar_dense`` (``partial``) though
every byte had been seen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from torchscan_stages.measure.memory import measure_peak_memory
from torchscan_stages.predict import predict_peak_memory


def _measured(workload: Callable[[], Any]) -> int:
    return int(measure_peak_memory(workload).memory.results[0].value)  # type: ignore[union-attr]


def _mlp() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)), torch.randn(8, 16)


def _logged() -> Callable[[], None]:
    model, x = _mlp()
    optimizer = torch.optim.AdamW(model.parameters())
    log: list[str] = []

    def step() -> None:
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        log.append(f"loss {loss.item():.4f}")  # logged after the step: no branch uses it

    return step


def _adafactor() -> Callable[[], None]:
    model, x = _mlp()
    optimizer = torch.optim.Adafactor(model.parameters())  # max(eps2, p.norm().item() ...)

    def step() -> None:
        model(x).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def _scaled() -> Callable[[], None]:
    model, x = _mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")  # step() reads found_inf.item()

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()

    return step


def _lengths_from_input() -> Callable[[], None]:
    model, x = _mlp()
    lengths = torch.tensor([3, 5])  # e.g. grid sizes or sequence lengths, a real input

    def step() -> None:
        with torch.no_grad():
            for n in lengths.tolist():  # read for real: the sizes the real run uses
                model(x[:n])

    return step


@pytest.mark.parametrize(
    "make", [_logged, _adafactor, _scaled, _lengths_from_input],
    ids=["loss_item_logged", "adafactor", "grad_scaler", "tolist_of_input"],
)  # fmt: skip
def test_read_without_a_branch_is_complete_and_exact(make: Callable[[], Any]) -> None:
    step = make()
    step()  # one real step: the optimizer and scaler state exist, as in a running loop
    report = predict_peak_memory(step, device="cpu")
    assert report.peak.status == "complete"
    # the real next step, measured by the tracker the prediction models (equal bytes)
    assert report.peak.value == _measured(step)
    codes = {d.code for d in report.diagnostics}
    if make is _lengths_from_input:
        assert "scalar_read" not in codes  # values known: nothing went on as a placeholder
    else:
        assert "scalar_read" in codes  # the read is named either way
    if make is _scaled:
        assert any("gradients assumed finite" in a for a in report.assumptions)


def test_a_read_that_chooses_a_branch_stops_and_names_both_lines() -> None:
    model, x = _mlp()

    def step() -> None:
        loss = model(x).pow(2).mean()
        if loss.item() > 1.0:  # a branch on a computed value: cannot be known
            loss.backward()

    report = predict_peak_memory(step, device="cpu")
    assert report.peak.status == "partial"
    stop = next(d for d in report.diagnostics if d.code == "fake_unsupported_operator")
    assert "in a comparison (a branch)" in stop.message and "test_scalar_reads.py" in stop.message
    assert "Build the model" not in stop.message  # the old advice, which fit none of these


def test_numpy_in_a_step_is_a_diagnostic_not_a_raw_exception() -> None:
    model, x = _mlp()

    def step() -> None:
        model(x).detach().numpy()

    report = predict_peak_memory(step, device="cpu")
    assert report.peak.status == "partial"
    stop = next(d for d in report.diagnostics if d.code == "fake_unsupported_operator")
    assert stop.operator == "Tensor.numpy"


class _LayerDrop(nn.Module):
    """BART-family LayerDrop: each layer skipped at random in training."""

    def __init__(self, layerdrop: float) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(32, 32) for _ in range(4))
        self.layerdrop = layerdrop

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            if self.training and torch.rand([]) < self.layerdrop:  # skip the layer
                continue
            x = torch.relu(layer(x))
        return x


def test_a_layerdrop_draw_is_answered_kept_with_a_warning() -> None:
    x = torch.randn(64, 32)
    dropping, keeping = _LayerDrop(0.5), _LayerDrop(0.0)  # the same layers, draws aside

    def step(model: nn.Module) -> Callable[[], None]:
        return lambda: model(x).pow(2).mean().backward()

    report = predict_peak_memory(step(dropping), device="cpu")
    assert report.peak.status == "complete"
    # every layer kept: the real step whose draws keep all four (layerdrop 0: same operators)
    assert report.peak.value == _measured(step(keeping))
    rule = next(d for d in report.diagnostics if d.code == "branch_assumed_by_rule")
    assert rule.severity == "warning" and "LayerDrop" in rule.message
