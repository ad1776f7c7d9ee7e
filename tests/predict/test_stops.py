"""A fake run that stops names the operator, the module path and the user's source line."""

from __future__ import annotations

import torch
from torch import nn

from torchscan_stages.measure.memory import measure_peak_memory
from torchscan_stages.predict import predict_peak_memory


class Router(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[x.sum(-1) > 0]  # boolean-mask indexing: its row count depends on the data


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.router = Router()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.router(x)


class DropPathSchedule(nn.Module):
    """ConvNeXt-style: per-block drop rates read with .tolist() in the constructor."""

    def __init__(self) -> None:
        super().__init__()
        self.rates = torch.linspace(0, 0.1, 4).tolist()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * (1 - self.rates[-1])


def test_a_data_dependent_stop_says_where_and_what_to_do() -> None:
    model = Block()

    def workload() -> None:
        model(torch.randn(16, 8))

    report = predict_peak_memory(workload, device="cpu")
    assert report.peak.status in ("partial", "unavailable")
    stop = next(d for d in report.diagnostics if d.code == "fake_unsupported_operator")
    assert stop.path == "Block.router"
    assert "test_stops.py:14" in stop.message  # the boolean-mask line above
    assert "routing='worst_case'" in stop.message  # the advice that fits this stop


def test_a_constructor_that_reads_data_predicts_when_built_outside() -> None:
    def built_inside() -> None:
        DropPathSchedule()(torch.randn(4, 8))

    # the rates come from torch.linspace: a small tensor whose value the prediction keeps
    # (predict/values.py), so .tolist() reads it even inside the step, as the real run does
    inside = predict_peak_memory(built_inside, device="cpu")
    assert inside.peak.status == "complete"
    # Linear(8, 8) 256 + 32 B, input, output and scaled output 3 x 128 B
    assert inside.peak.value == 256 + 32 + 3 * 128
    assert inside.peak.value == measure_peak_memory(built_inside).memory.results[0].value
    model = DropPathSchedule()

    def built_outside() -> None:
        with torch.no_grad():
            model(torch.randn(4, 8))

    report = predict_peak_memory(built_outside, device="cpu")
    assert report.peak.status == "complete"
    # input 4*8*4 = 128 B, Linear's output 128 B, the scaled output 128 B
    assert report.peak.value == 3 * 128


def test_an_operator_that_raises_under_fake_tensors_is_a_diagnostic() -> None:
    def workload() -> None:
        a = torch.ones(2, 3)  # 24 bytes, alive when the run stops
        torch.mm(a, torch.ones(4, 5))  # refused (shapes): no raw exception

    report = predict_peak_memory(workload, device="cpu")
    assert report.peak.status == "partial"
    assert report.peak.known_value == 24 + 80  # both inputs: 2*3*4 and 4*5*4 bytes
    stop = next(d for d in report.diagnostics if d.code == "fake_unsupported_operator")
    assert stop.operator == "aten.mm.default"
    assert "outside any module" in stop.message and "test_stops.py" in stop.message


def test_an_unimplemented_fake_kernel_is_a_diagnostic_not_an_assertion() -> None:
    """torch 2.13's fake ``_pin_memory`` raises ``AssertionError: NYI`` (FSDP2's default
    ``CPUOffloadPolicy`` pins its host shards): a stop with the operator named."""

    def workload() -> None:
        torch.ops.aten._pin_memory.default(torch.ones(4))

    report = predict_peak_memory(workload, device="cuda")
    assert report.peak.status in ("partial", "unavailable")
    stop = next(d for d in report.diagnostics if d.code == "fake_unsupported_operator")
    assert stop.operator == "aten._pin_memory.default" and "NYI" in stop.message
