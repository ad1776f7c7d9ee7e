"""torchao's weight-only quantized linears: FLOPs equal closed forms, parameter bytes equal
the storage bytes of the tensors the subclass keeps (int8 / fp8 ``qdata``, scales, zero
points), in crawl_module and in predict_peak_memory's resident parameters alike.

The int4 case is torchao's CPU one, ``IntxWeightOnlyConfig(weight_dtype=torch.int4)``: its
int4 values are kept unpacked, one per int8 byte. ``Int4WeightOnlyConfig`` has no CPU path in
torchao 0.18 (its packing formats need CUDA, XPU or the mslk library); the packed CPU int4
kernel itself is tested in test_quantized.py and tests/predict/test_resident_quantized.py.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from torch import nn

from torchscan_stages import crawl_module, measure_flops
from torchscan_stages.measure.memory import measure_peak_memory
from torchscan_stages.predict import predict_peak_memory

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torchao_quantization = pytest.importorskip("torchao.quantization")

M, K, N = 4, 64, 32  # x (4, 64) bf16 through a bf16 Linear(64, 32) with bias


def _quantized(config: Any) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(K, N)).to(torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torchao_quantization.quantize_(model, config)
    return model


def _inner_bytes(model: nn.Module) -> dict[str, int]:
    weight = model[0].weight
    names, _ = weight.__tensor_flatten__()
    return {name: getattr(weight, name).untyped_storage().nbytes() for name in names}


def _check(model: nn.Module, flops: int, products: int, storage: int) -> None:
    x = torch.randn(M, K, dtype=torch.bfloat16)
    with torch.no_grad():
        counted = measure_flops(lambda: model(x))
    assert counted.product_flops is not None and counted.product_flops.value == products
    assert counted.total.is_complete and counted.total.value == flops
    crawled = crawl_module(model, (K,), dtype=torch.bfloat16)
    assert crawled.totals.parameters.value == K * N + N  # 2,080 logical values
    assert crawled.totals.parameter_bytes.value == storage
    # one row: 64 x 32 = 2,048 MACs; the float formula 2 x 2,048 + 32 bias = 4,128 is only a
    # lower bound of the module's FLOPs (the dequantisation is the kernel's, not the formula's)
    assert crawled.totals.macs.is_complete and crawled.totals.macs.value == K * N
    lower = crawled.totals.module_flops
    assert lower.status == "partial" and lower.known_value == 2 * K * N + N
    assert any(d.code == "formula_partial" for d in crawled.diagnostics)
    with torch.no_grad():
        predicted = predict_peak_memory(lambda: model(x), device="cpu")
        measured = measure_peak_memory(lambda: model(x)).memory
    assert predicted.resident_by_category["parameters"].value == storage
    assert predicted.resident_by_category["inputs"].value == M * K * 2  # x: 512 bytes
    assert measured is not None and predicted.peak.value == measured.results[0].value


def test_int8_weight_only_linear() -> None:
    model = _quantized(torchao_quantization.Int8WeightOnlyConfig())
    inner = _inner_bytes(model)
    # qdata int8 32 x 64 = 2,048; per-row scale 32 x float32 = 128; zero point 32 x int8 = 32
    assert inner == {"qdata": 2_048, "scale": 128, "zero_point": 32}
    # mm 2 x 4 x 64 x 32 = 16,384; per-channel rescale 4 x 32 = 128; bias add 4 x 32 = 128
    # storage: 2,048 + 128 + 32 + the bf16 bias 32 x 2 = 2,272 bytes (not 2,080 x 2 = 4,160)
    _check(model, flops=16_384 + 128 + 128, products=16_384, storage=2_048 + 128 + 32 + 64)


def test_int4_weight_only_linear_unpacked_to_int8() -> None:
    granularity = pytest.importorskip("torchao.quantization.granularity")
    config = torchao_quantization.IntxWeightOnlyConfig(
        weight_dtype=torch.int4, granularity=granularity.PerGroup(32)
    )
    model = _quantized(config)
    inner = _inner_bytes(model)
    # int4 values one a byte 32 x 64 = 2,048; two groups of 32: scales 32 x 2 bf16 = 128,
    # zero points 32 x 2 int8 = 64
    assert inner == {"qdata": 2_048, "scale": 128, "zero_point": 64}
    # addmm 16,384 (bias fused in, not counted, as torch counts addmm); dequantisation
    # (w - zero) * scale over the 32 x 64 weight: 2,048 + 2,048
    _check(model, flops=16_384 + 2 * 2_048, products=16_384, storage=2_048 + 128 + 64 + 64)


def test_fp8_weight_only_linear() -> None:
    model = _quantized(torchao_quantization.Float8WeightOnlyConfig())
    inner = _inner_bytes(model)
    assert inner == {"qdata": 2_048, "scale": 128}  # fp8 32 x 64; per-row float32 scale
    # mm 16,384; dequantisation qdata * scale over the weight 2,048; bias add 4 x 32 = 128
    _check(model, flops=16_384 + 2_048 + 128, products=16_384, storage=2_048 + 128 + 64)
