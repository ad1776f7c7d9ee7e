"""Quantized models: dynamic int8 (quantize_dynamic on Linear and LSTM), weight-only int8 and
int4 products, fp8 ``_scaled_mm`` on meta. FLOPs equal the closed forms written here;
parameters and parameter bytes are the real storage (int8: 1 byte per weight)."""

from __future__ import annotations

import pytest
import torch
from quantized_models import mlp, quantize
from torch import nn

from torchscan_stages import crawl_module, measure_flops

quantization = pytest.importorskip("torch.ao.quantization")


def test_quantize_dynamic_mlp_counts_and_storage() -> None:
    model = quantize(mlp(), {nn.Linear})
    x = torch.randn(4, 16)
    flops = measure_flops(lambda: model(x))
    # products 2 x 4 rows x (16*32 + 32*8) = 6,144; biases 4 x (32 + 8) = 160; ReLU 4 x 32
    assert flops.product_flops is not None and flops.product_flops.value == 6_144
    assert flops.total.is_complete and flops.total.value == 6_144 + 160 + 128 == 6_432
    report = crawl_module(model, (16,))
    totals = report.totals
    # weights 16*32 + 32*8 = 768 int8 (1 byte each), biases 32 + 8 = 40 float32 (4 bytes)
    assert totals.parameters.value == 768 + 40 == 808
    assert totals.parameter_bytes.value == 768 + 4 * 40 == 928
    assert totals.frozen_parameters.value == 808  # packed weights take no gradient
    # MACs from the products each quantized layer ran: 512 + 256 per row, batch 1 = 768
    assert totals.macs.is_complete and totals.macs.value == 768
    first = next(r for r in report.layers if r.path == "0")
    assert (first.params.parameters, first.params.parameter_bytes) == (544, 512 + 128)


def test_a_model_mixing_quantized_and_float_layers_is_complete() -> None:
    model = quantize(mlp(), {"0"})  # only the first Linear is quantized
    assert type(model[2]) is nn.Linear
    report = crawl_module(model, (16,))
    # first layer int8 512 + float bias 32 x 4; the float Linear 264 x 4 bytes
    assert report.totals.parameters.value == 544 + 264 == 808
    assert report.totals.parameter_bytes.value == 512 + 128 + 4 * 264 == 1_696
    assert report.totals.macs.is_complete and report.totals.macs.value == 16 * 32 + 32 * 8
    assert report.totals.operator_flops.is_complete


def test_per_channel_storage_counts_scales_and_zero_points() -> None:
    model = quantize(mlp(), None, quantization.per_channel_dynamic_qconfig)
    report = crawl_module(model, (16,))
    weight = model[0]._weight_bias()[0]
    scales, zeros = weight.q_per_channel_scales(), weight.q_per_channel_zero_points()
    per_channel = 32 * scales.element_size() + 32 * zeros.element_size()
    second = model[2]._weight_bias()[0]
    per_channel += 8 * second.q_per_channel_scales().element_size()
    per_channel += 8 * second.q_per_channel_zero_points().element_size()
    # int8 weights 768 + float32 biases 160 bytes + each output channel's scale and zero point
    assert report.totals.parameter_bytes.value == 768 + 160 + per_channel


def test_quantize_dynamic_lstm() -> None:
    model = quantize(nn.Sequential(nn.LSTM(8, 16)), {nn.LSTM})
    x = torch.randn(5, 2, 8)
    flops = measure_flops(lambda: model(x))
    rows, gates = 5 * 2, 4 * 16
    # per step and row: products 2*8*64 + 2*16*64 = 3,072; input bias 64; gates 13 x 16 = 208
    assert flops.product_flops is not None and flops.product_flops.value == rows * 3_072
    assert flops.total.is_complete and flops.total.value == rows * (3_072 + gates + 208)
    report = crawl_module(model, (5, 8))
    # w_ih 64x8 + w_hh 64x16 = 1,536 int8 bytes; b_ih, b_hh 2 x 64 float32 = 512 bytes
    assert report.totals.parameters.value == 1_536 + 128
    assert report.totals.parameter_bytes.value == 1_536 + 512
    # batch 1, 5 steps: 5 x (8*64 + 16*64) = 7,680 MACs
    assert report.totals.macs.is_complete and report.totals.macs.value == 7_680


def test_weight_only_int8_and_int4_products() -> None:
    x = torch.randn(4, 32, dtype=torch.bfloat16)
    w8 = torch.randint(-128, 127, (16, 32), dtype=torch.int8)
    scales = torch.rand(16, dtype=torch.bfloat16)
    report = measure_flops(lambda: torch._weight_int8pack_mm(x, w8, scales))
    # 2 x 4 x 32 x 16 = 4,096 products + 4 x 16 = 64 per-channel rescales
    assert report.product_flops is not None and report.product_flops.value == 4_096
    assert report.total.value == 4_096 + 64
    if not hasattr(torch, "_convert_weight_to_int4pack_for_cpu"):
        pytest.skip("this torch build has no CPU int4 packing")
    packed = torch._convert_weight_to_int4pack_for_cpu(
        torch.randint(0, 16, (16, 32), dtype=torch.int32), 1
    )
    scales_zeros = torch.rand(1, 16, 2, dtype=torch.bfloat16)  # one group of 32
    report = measure_flops(lambda: torch._weight_int4pack_mm_for_cpu(x, packed, 32, scales_zeros))
    # 4,096 products + (w - zero) * scale over the 16 x 32 weight: 2 x 512 = 1,024
    assert report.product_flops is not None and report.product_flops.value == 4_096
    assert report.total.is_complete and report.total.value == 4_096 + 1_024


def test_fp8_scaled_mm_on_meta() -> None:
    a = torch.empty(16, 32, device="meta", dtype=torch.float8_e4m3fn)
    b = torch.empty(64, 32, device="meta", dtype=torch.float8_e4m3fn).t()
    one = torch.ones((), device="meta")
    report = measure_flops(
        lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    )
    # 2 x 16 x 32 x 64 = 65,536, all tensor products
    assert report.total.is_complete and report.total.value == 65_536
    assert report.product_flops is not None and report.product_flops.value == 65_536
