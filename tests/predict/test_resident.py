"""Workloads that close over a model, an optimizer and inputs built outside the step.

The tensors they reach are resident: seen through fake copies, counted once beside the
step's peak, and never changed by the prediction, on success and on failure.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from torchscan_stages.measure.memory import measure_peak_memory
from torchscan_stages.predict import predict_peak_memory


def _measured(workload: Callable[[], Any]) -> int:
    result = measure_peak_memory(workload).memory.results[0]  # type: ignore[union-attr]
    assert result.scope == "cpu_tracked_tensors"
    return int(result.value)


def _state_bytes(*objects: Any) -> bytes:
    """Every tensor of models and optimizers (optimizer state incl. ``step``), serialised."""
    buffer = io.BytesIO()
    saved: list[Any] = []
    for obj in objects:
        if isinstance(obj, nn.Module):
            saved.append(obj.state_dict())
            saved.append({n: p.grad for n, p in obj.named_parameters()})
            saved.append([m.training for m in obj.modules()])
        else:
            saved.append(obj.state_dict())
    saved.append(
        (
            torch.get_rng_state(),
            str(torch.get_default_dtype()),
            str(torch.get_default_device()),
            torch.is_grad_enabled(),
        )
    )
    torch.save(saved, buffer)
    return buffer.getvalue()


def _mlp() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024))
    return model, torch.randn(64, 1024)


def test_model_built_outside_is_resident_and_the_step_peak_matches_the_measured() -> None:
    mlp, x = _mlp()

    def inference() -> None:
        with torch.no_grad():
            mlp(x)

    report = predict_peak_memory(inference, device="cpu")
    # the step creates Linear(1024, 4096)'s output and GELU's: 2 * 64 * 4096 * 4 bytes;
    # the weights (16 MiB each) are resident, never activations
    assert report.peak.value == 2 * 64 * 4096 * 4  # 2,097,152
    assert report.peak.status == "complete"
    assert report.peak.value == _measured(inference)
    parts = {name: r.value for name, r in report.resident_by_category.items()}
    assert parts["parameters"] == 4 * (1024 * 4096 + 4096 + 4096 * 1024 + 1024)
    assert parts["inputs"] == 64 * 1024 * 4  # x, from the closure
    assert parts["gradients"] == parts["optimizer_state"] == parts["buffers"] == 0
    assert report.resident_bytes.value == sum(parts.values())  # type: ignore[union-attr]
    assert report.headline == "peak"  # no optimizer step: nothing steady about it


def _steady_setup() -> tuple[nn.Module, torch.optim.Optimizer, Callable[[], None]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, 8))
    optimizer = torch.optim.AdamW(model.parameters(), weight_decay=0.1)
    x = torch.randn(32, 64)

    def step() -> None:
        model(x).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    step()  # AdamW's state (exp_avg, exp_avg_sq, step) now exists
    return model, optimizer, step


def test_a_steady_state_adamw_step_predicts_and_changes_nothing() -> None:
    model, optimizer, step = _steady_setup()
    before = _state_bytes(model, optimizer)
    reports = [predict_peak_memory(step, device="cpu") for _ in range(3)]
    assert _state_bytes(model, optimizer) == before  # step counter, weights, moments, BN stats
    report = reports[0]
    # the step counter is read for real (.item() on the constant copy): no data-dependent stop
    assert report.peak.status == "complete", report.diagnostics
    assert report.headline == "steady_state_peak"
    assert report.steady_state_peak == report.peak
    assert report.first_step_peak is not None and report.first_step_peak.status == "unavailable"
    n = sum(p.numel() for p in model.parameters())  # 64*256+256 + 2*256 + 256*8+8 = 19,208
    assert n == 19_208
    resident = {name: r.value for name, r in report.resident_by_category.items()}
    assert resident["parameters"] == 4 * n
    # exp_avg and exp_avg_sq: 2 * 4n, and one 4-byte step counter per parameter tensor (6)
    assert resident["optimizer_state"] == 8 * n + 6 * 4
    assert resident["buffers"] == 4 * (256 + 256) + 8  # running mean/var, num_batches_tracked
    measured = _measured(step)  # now the real step runs (and trains the model)
    # stated tolerance: 5 % (the bar)
    assert abs(report.peak.value - measured) <= 0.05 * measured  # type: ignore[operator]


def test_a_failed_prediction_changes_nothing_either() -> None:
    model, optimizer, step = _steady_setup()

    def stops_after_the_step() -> None:
        torch.manual_seed(123)  # global state the prediction must put back
        torch.set_default_dtype(torch.float64)
        step()
        torch.nonzero(torch.rand(3))  # data-dependent (random values): the fake run stops here

    def raises_after_the_step() -> None:
        step()
        raise KeyError("the workload's own bug")

    before = _state_bytes(model, optimizer)
    partial = predict_peak_memory(stops_after_the_step, device="cpu")
    assert partial.peak.status == "partial"
    assert _state_bytes(model, optimizer) == before
    with pytest.raises(KeyError, match="own bug"):
        predict_peak_memory(raises_after_the_step, device="cpu")
    assert _state_bytes(model, optimizer) == before
    assert torch.get_default_dtype() == torch.float32


def test_a_fresh_training_step_reports_first_and_steady_state() -> None:
    """Built inside: the first step creates AdamW's state; the steady state has it all along.

    The steady-state figure is checked against the real second step of the same model.
    """

    def fresh() -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor]:
        model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
        # a large batch: the backward pass's peak (activations) tops the optimizer step's,
        # so the state that the steady state holds through it raises the peak
        x = torch.randn(1024, 256)
        return model, torch.optim.AdamW(model.parameters(), foreach=False), x

    def one_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor) -> None:
        model(x).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    def first_step() -> None:
        one_step(*fresh())

    def two_steps() -> None:
        parts = fresh()
        one_step(*parts)
        one_step(*parts)

    report = predict_peak_memory(first_step, device="cpu")
    assert report.headline == "steady_state_peak"
    assert report.first_step_peak == report.peak
    assert report.peak.value == pytest.approx(_measured(first_step), rel=0.05)
    steady = report.steady_state_peak
    assert steady is not None and steady.status == "complete"
    # the real second step, measured: the peak of two steps is the second's (its state lives
    # through forward and backward); stated tolerance 5 %
    assert steady.value == pytest.approx(_measured(two_steps), rel=0.05)
    assert steady.value > report.peak.value  # type: ignore[operator]
    state = 2 * 4 * (256 * 512 + 512 + 512 * 10 + 10) + 4 * 4  # exp_avg, exp_avg_sq, 4 steps
    assert steady.value <= report.peak.value + state  # type: ignore[operator]


def test_capacity_counts_resident_and_step() -> None:
    mlp, x = _mlp()

    def inference() -> None:
        with torch.no_grad():
            mlp(x)

    resident = 4 * (1024 * 4096 + 4096 + 4096 * 1024 + 1024) + 64 * 1024 * 4
    need = resident + 2 * 64 * 4096 * 4
    assert predict_peak_memory(inference, device="cpu", capacity_bytes=need).fits is True
    assert predict_peak_memory(inference, device="cpu", capacity_bytes=need - 1).fits is False


def test_workloads_that_do_not_run_their_work_are_not_zero_complete() -> None:
    model = nn.Linear(8, 8)

    def generator() -> Any:
        yield model(torch.ones(2, 8))

    async def coroutine() -> None:
        model(torch.ones(2, 8))

    def nothing() -> None:
        return None

    def on_meta() -> None:
        with torch.device("meta"):
            nn.Linear(8, 8)(torch.ones(2, 8))

    for workload, code in (
        (generator, "lazy_output"),
        (coroutine, "lazy_output"),
        (nothing, "no_operators"),
        (on_meta, "ran_on_meta"),
    ):
        report = predict_peak_memory(workload, device="cpu")
        assert report.peak.status == "unavailable", workload.__name__
        assert code in {d.code for d in report.diagnostics}, workload.__name__
