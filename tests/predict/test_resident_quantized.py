"""Predictions on quantized models use the real storage bytes of their weights.

``quantize_dynamic`` keeps packed int8 weights in TorchBind objects (``parameters()`` is
empty); they are resident parameters by their storage bytes, the same figure as
``crawl_module``'s ``parameter_bytes``. Weight-only int8 / int4 and fp8 weights are plain
tensors of 1-byte (or packed half-byte) elements, counted by their storage. The step's peak
equals ``measure_peak_memory``'s on the real run.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
import torch
from quantized_models import mlp, quantize
from torch import nn

from torchscan_stages import crawl_module
from torchscan_stages.measure.memory import measure_peak_memory
from torchscan_stages.predict import predict_peak_memory

quantization = pytest.importorskip("torch.ao.quantization")


def _measured(workload: Callable[[], Any]) -> tuple[int, int]:
    """(peak, pre-existing tensor bytes the real run read) from measure_peak_memory."""
    report = measure_peak_memory(workload).memory
    assert report is not None and report.results[0].scope == "cpu_tracked_tensors"
    return int(report.results[0].value), report.baseline_bytes["cpu_tracked_tensors_preexisting"]


def _resident(report: Any) -> dict[str, int]:
    return {name: int(r.value) for name, r in report.resident_by_category.items()}


def _packed_state(model: nn.Module) -> bytes:
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getvalue()


def test_quantize_dynamic_mlp_parameters_are_its_storage_bytes() -> None:
    model, x = quantize(mlp(), {nn.Linear}), torch.randn(4, 16)
    before = _packed_state(model)
    report = predict_peak_memory(lambda: model(x), device="cpu")
    resident = _resident(report)
    # int8 weights 16*32 + 32*8 = 768 bytes; float32 biases (32 + 8) x 4 = 160 bytes
    assert resident["parameters"] == 768 + 160 == 928
    assert resident["parameters"] == crawl_module(model, (16,)).totals.parameter_bytes.value
    assert resident["inputs"] == 4 * 16 * 4  # x: 256 bytes
    assert report.resident_bytes is not None and report.resident_bytes.value == 928 + 256
    note = next(d for d in report.diagnostics if d.code == "packed_weights_by_value")
    assert note.count == 2 and "Linear" in note.message and note.severity == "info"
    # the step: layer 0's output 4x32 float32 (512) alive with ReLU's (512)
    peak, preexisting = _measured(lambda: model(x))
    assert report.peak.is_complete and report.peak.value == peak == 512 + 512
    assert preexisting == 256  # the real run's tracked tensors do not see packed weights
    assert _packed_state(model) == before  # the packed weights are left as found


def test_per_channel_packed_weights_count_scales_and_zero_points() -> None:
    model = quantize(mlp(), None, quantization.per_channel_dynamic_qconfig)
    x = torch.randn(4, 16)
    weight = model[0]._weight_bias()[0]
    scale_bytes = weight.q_per_channel_scales().element_size()  # float64: 8
    zero_bytes = weight.q_per_channel_zero_points().element_size()  # int64: 8
    report = predict_peak_memory(lambda: model(x), device="cpu")
    # 928 as per tensor, plus a scale and a zero point for each of 32 + 8 output channels
    expected = 928 + (32 + 8) * (scale_bytes + zero_bytes)
    assert _resident(report)["parameters"] == expected
    assert expected == crawl_module(model, (16,)).totals.parameter_bytes.value


def test_quantize_dynamic_lstm_parameters_are_its_storage_bytes() -> None:
    torch.manual_seed(0)
    model = quantize(nn.Sequential(nn.LSTM(8, 16)), {nn.LSTM})
    x = torch.randn(5, 2, 8)
    report = predict_peak_memory(lambda: model(x), device="cpu")
    resident = _resident(report)
    # w_ih 64x8 + w_hh 64x16 = 1,536 int8 bytes; b_ih, b_hh 2 x 64 float32 = 512 bytes
    assert resident["parameters"] == 1_536 + 512 == 2_048
    assert resident["parameters"] == crawl_module(model, (5, 8)).totals.parameter_bytes.value
    assert resident["inputs"] == 5 * 2 * 8 * 4  # 320
    peak, _ = _measured(lambda: model(x))
    assert report.peak.is_complete and report.peak.value == peak


def test_a_model_mixing_quantized_and_float_layers() -> None:
    model, x = quantize(mlp(), {"0"}), torch.randn(4, 16)
    assert type(model[2]) is nn.Linear
    report = predict_peak_memory(lambda: model(x), device="cpu")
    # int8 512 + float bias 32 x 4 = 640 for layer 0; the float Linear (256 + 8) x 4 = 1,056
    parameters = _resident(report)["parameters"]
    assert parameters == 640 + 1_056 == 1_696
    assert parameters == crawl_module(model, (16,)).totals.parameter_bytes.value
    note = next(d for d in report.diagnostics if d.code == "packed_weights_by_value")
    assert note.count == 1


class Int8WeightOnly(nn.Module):
    """A weight-only int8 linear: int8 (N, K) weight, bf16 per-channel scales."""

    def __init__(self, n: int, k: int) -> None:
        super().__init__()
        weight = torch.randint(-128, 127, (n, k), dtype=torch.int8)
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.register_buffer("scales", torch.rand(n, dtype=torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch._weight_int8pack_mm(x, self.weight, self.scales)


class Int4WeightOnly(nn.Module):
    """A weight-only int4 linear: (N, K) int4 values packed two per byte, one group of K."""

    def __init__(self, n: int, k: int) -> None:
        super().__init__()
        values = torch.randint(0, 16, (n, k), dtype=torch.int32)
        packed = torch._convert_weight_to_int4pack_for_cpu(values, 1)
        self.weight = nn.Parameter(packed, requires_grad=False)
        self.register_buffer("scales_zeros", torch.rand(1, n, 2, dtype=torch.bfloat16))
        self.group = k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch._weight_int4pack_mm_for_cpu(x, self.weight, self.group, self.scales_zeros)


def test_weight_only_int8_linear_is_counted_by_its_int8_storage() -> None:
    torch.manual_seed(0)
    model, x = Int8WeightOnly(16, 32), torch.randn(4, 32, dtype=torch.bfloat16)
    report = predict_peak_memory(lambda: model(x), device="cpu")
    resident = _resident(report)
    assert resident["parameters"] == 16 * 32 * 1  # 512: one byte per int8 weight
    assert resident["buffers"] == 16 * 2  # bf16 scales: 32
    assert resident["inputs"] == 4 * 32 * 2  # 256
    assert crawl_module(model, (32,), dtype=torch.bfloat16).totals.parameter_bytes.value == 512
    peak, preexisting = _measured(lambda: model(x))
    assert report.peak.value == peak == 4 * 16 * 2  # the bf16 output: 128
    assert preexisting == 512 + 32 + 256  # the real run read the same storages


def test_weight_only_int4_linear_is_counted_by_its_packed_storage() -> None:
    if not hasattr(torch, "_convert_weight_to_int4pack_for_cpu"):
        pytest.skip("this torch build has no CPU int4 packing")
    torch.manual_seed(0)
    model, x = Int4WeightOnly(16, 64), torch.randn(4, 64, dtype=torch.bfloat16)
    report = predict_peak_memory(lambda: model(x), device="cpu")
    resident = _resident(report)
    assert resident["parameters"] == 16 * 64 // 2  # two int4 values a byte: 512
    assert resident["buffers"] == 16 * 2 * 2  # bf16 scale and zero per channel: 64
    assert crawl_module(model, (64,), dtype=torch.bfloat16).totals.parameter_bytes.value == 512
    peak, preexisting = _measured(lambda: model(x))
    assert report.peak.value == peak == 4 * 16 * 2  # 128
    assert preexisting == 512 + 64 + 4 * 64 * 2


class Fp8Linear(nn.Module):
    """An fp8 (e4m3) weight, the input cast to fp8, a bf16 product from ``_scaled_mm``."""

    def __init__(self, n: int, k: int) -> None:
        super().__init__()
        weight = torch.randn(n, k).to(torch.float8_e4m3fn)
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.register_buffer("scale", torch.ones(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch._scaled_mm(
            x.to(torch.float8_e4m3fn),
            self.weight.t(),
            scale_a=self.scale,
            scale_b=self.scale,
            out_dtype=torch.bfloat16,
        )


def test_fp8_weights_are_counted_by_their_one_byte_storage() -> None:
    torch.manual_seed(0)
    model, x = Fp8Linear(32, 64), torch.randn(16, 64)
    report = predict_peak_memory(lambda: model(x), device="cpu")
    resident = _resident(report)
    assert resident["parameters"] == 32 * 64  # one byte per fp8 weight: 2,048
    assert resident["buffers"] == 4  # the float32 scale
    # the fp8 copy of x (16 x 64 x 1 = 1,024) alive with the bf16 product (16 x 32 x 2 = 1,024)
    assert report.peak.value == 1_024 + 1_024
    try:
        peak, _ = _measured(lambda: model(x))
    except RuntimeError as error:  # a CPU build without an fp8 _scaled_mm kernel
        pytest.skip(f"no CPU fp8 _scaled_mm here: {error}")
    assert peak == report.peak.value
