"""crawl_module on a DeepSeek-V3-shaped MoE built on ``meta``: exact counts, no data touched.

The model is benchmarks/models.py's ``moe_model`` at a test size (the benchmark crawls the
full 61 x 256 x 3 = 46,848-Linear one): every expert of every layer runs on every token, so
the call count and the MACs have a closed form.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from benchmarks.models import MoELayer, moe_model
from torchscan_stages.analysis.crawl import crawl_module
from torchscan_stages.report import AnalysisReport

LAYERS, EXPERTS, HIDDEN, INTER = 3, 4, 16, 8
BATCH, SEQ = 2, 5
TOKENS = BATCH * SEQ  # 10 rows through every Linear
# one expert: gate and up (HIDDEN -> INTER), down (INTER -> HIDDEN), each 10 x 16 x 8 = 1280
LINEAR_MACS = TOKENS * HIDDEN * INTER  # 1280
EXPERT_MACS = 3 * LINEAR_MACS  # 3840
TOTAL_MACS = LAYERS * EXPERTS * EXPERT_MACS  # 3 x 4 x 3840 = 46080


def _crawl(**options: Any) -> AnalysisReport:
    model = moe_model(LAYERS, EXPERTS, HIDDEN, INTER, device="meta")
    x = torch.empty(BATCH, SEQ, HIDDEN, device="meta")
    return crawl_module(model, args=(x,), **options)


def test_call_count_and_linear_macs_closed_form() -> None:
    report = _crawl()
    linear = [layer for layer in report.layers if layer.type == "Linear"]
    # 3 layers x 4 experts x 3 Linear = 36 Linear calls; + 3 MoE layers + the Sequential = 40
    assert len(linear) == LAYERS * EXPERTS * 3 == 36
    assert len(report.layers) == 36 + LAYERS + 1 == 40
    assert {layer.metrics.macs.value for layer in linear} == {LINEAR_MACS}  # 1280 each
    # own products of each Linear by operator dispatch: 2 FLOPs per MAC = 2560
    assert {layer.operator_flops.own_products.value for layer in linear} == {2 * LINEAR_MACS}
    # the MoE layer's own silu * up and residual adds run no tensor product: 0 own MACs
    # read from its operators, so the total is exactly the Linear MACs
    macs = report.totals.macs
    assert macs.status == "complete" and macs.value == TOTAL_MACS == 46080
    assert macs.method == "module_formula+operator_fill"


def test_fill_from_operators_completes_macs_on_meta() -> None:
    report = _crawl(fill_from_operators=[MoELayer])
    macs = report.totals.macs
    # silu, mul and add do no tensor product: the filled own MACs are 0, the total exact
    assert macs.status == "complete" and macs.value == TOTAL_MACS == 46080
    assert macs.method == "module_formula+operator_fill"
    # tensor-product FLOPs of the whole forward: 2 x 46080 = 92160
    assert report.operator_flops.product_flops.value == 2 * TOTAL_MACS


def test_meta_crawl_touches_no_data() -> None:
    """On meta a handler reading values (.item(), a statistic) would raise: none did."""
    report = _crawl()
    codes = {d.code for d in report.diagnostics}
    assert "ran_without_data" in codes and "handler_failed" not in codes
    assert {layer.input.items[0].device for layer in report.layers} == {"meta"}


def test_moe_layer_layout() -> None:
    layer = moe_model(1, EXPERTS, HIDDEN, INTER, device="meta")[0]
    assert isinstance(layer, MoELayer)
    assert isinstance(layer.gate_proj, nn.ModuleList) and len(layer.gate_proj) == EXPERTS
    assert all(p.device.type == "meta" for p in layer.parameters())
    # 4 experts x (16x8 + 16x8 + 8x16) = 4 x 384 = 1536 parameters, no bias
    assert sum(p.numel() for p in layer.parameters()) == 1536
