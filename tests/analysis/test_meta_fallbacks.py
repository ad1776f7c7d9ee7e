"""measure_flops and crawl_module on meta tensors: a report where torch's meta kernel refuses."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchscan_stages import crawl_module, measure_flops
from torchscan_stages.analysis.operators.fallbacks import NoFakeKernel


def test_fp32_grouped_mm_on_meta_has_its_output_shape() -> None:
    """torch 2.13's meta _grouped_mm accepts only bf16; the CPU kernel runs fp32."""
    a = torch.empty(12, 16, device="meta")
    b = torch.empty(3, 16, 8, device="meta")
    offs = torch.empty(3, dtype=torch.int32, device="meta")
    seen: list[torch.Tensor] = []
    report = measure_flops(lambda: seen.append(torch._grouped_mm(a, b, offs)))
    assert seen[0].shape == (12, 8) and seen[0].dtype == torch.float32 and seen[0].is_meta
    # the offsets are routing data a meta tensor does not hold: uncounted, never guessed
    assert report.total.status != "complete"
    assert any(d.operator == "aten._grouped_mm" or "_grouped_mm" in d.message
               for d in report.diagnostics)  # fmt: skip


def test_meta_deepseek_v3_measure_flops_and_crawl_return_reports() -> None:
    """The DeepSeek-V3-shaped MoE (transformers 5 routes experts through _grouped_mm)."""
    pytest.importorskip("transformers")
    from torchscan_stages.integrations.hf_families import FAMILIES

    family = FAMILIES["deepseek_v3"]
    with torch.device("meta"):
        meta = family.build()
    real = family.build()
    ids = torch.randint(1, 96, (1, 8))
    on_meta = measure_flops(lambda: meta(input_ids=ids.to("meta")))
    on_cpu = measure_flops(lambda: real(input_ids=ids))
    assert on_cpu.total.status == "complete"
    # real experts: 8 tokens x top-2 = 16 rows; gate_up 2*16*32*32 + down 2*16*16*32
    assert on_cpu.by_operator["aten._grouped_mm"].flops.value == 32_768 + 16_384
    assert on_meta.total.status == "partial"
    assert on_meta.by_operator["aten._grouped_mm"].flops.status == "unavailable"
    # every dense projection is counted on meta exactly as on the CPU (284,672 FLOPs)
    assert on_meta.by_operator["aten.mm"].flops == on_cpu.by_operator["aten.mm"].flops
    assert any("routing data" in d.message for d in on_meta.diagnostics)
    crawled = crawl_module(meta, kwargs={"input_ids": ids.to("meta")})
    assert crawled.operator_flops is not None
    assert crawled.operator_flops.by_operator["aten.mm"].flops.value == 284_672


class _ReadsAValue(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = x.abs().max().item()  # a data-dependent read: no meta kernel can answer it
        return x / scale


def test_an_operator_without_a_meta_kernel_is_a_diagnostic_not_a_raw_error() -> None:
    model = nn.Sequential(nn.Linear(8, 8), _ReadsAValue())
    x = torch.empty(4, 8, device="meta")
    with torch.device("meta"):
        meta = nn.Sequential(nn.Linear(8, 8), _ReadsAValue())
    report = measure_flops(lambda: meta(x))
    assert report.total.status == "partial"
    # the Linear before the stop is counted: 2 * 4 * 8 * 8 products
    assert report.product_flops is not None and report.product_flops.known_value == 512
    stop = next(d for d in report.diagnostics if d.code == "fake_unsupported_operator")
    assert stop.operator == "aten._local_scalar_dense.default"
    assert stop.path == "Sequential.1"
    assert "test_meta_fallbacks.py:" in stop.message  # the user's source line
    with pytest.raises(NoFakeKernel, match=r"_local_scalar_dense.*test_meta_fallbacks\.py:"):
        crawl_module(meta, args=(x,))
    # real tensors: the real run's own behaviour, unchanged
    assert measure_flops(lambda: model(torch.randn(4, 8))).total.status == "complete"
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied") as raised:
        measure_flops(lambda: model(torch.randn(4, 7)))
    assert not isinstance(raised.value, NoFakeKernel)
