"""Hugging Face families no issue names, built from config: predicted vs the real run.

Each family's AdamW training step (model and optimizer built outside the step, as a user
writes it), fp32 and under bf16 autocast, is predicted and measured with
``measure_peak_memory`` on the same callable: the first step against one real step, the
steady state against two real steps (the second step's peak, with the state the first
made). A ``complete`` result must be within 5 %; anything not within 5 % must not be
``complete``. Configs are tiny (width 32, 1-2 layers, batch 2 x 8 tokens or 32x32 pixels).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from torchscan_stages.measure.memory import measure_peak_memory
from torchscan_stages.predict import predict_peak_memory

pytest.importorskip("transformers")

from torchscan_stages.integrations.hf_families import GPT2, PREDICTION_FAMILIES, Family

FAMILIES = PREDICTION_FAMILIES


def _first_output(out: Any) -> torch.Tensor:
    for key in ("logits", "last_hidden_state"):
        value = getattr(out, key, None)
        if value is not None:
            return value  # type: ignore[no-any-return]
    return out[0]  # type: ignore[no-any-return]


def _step(family: Family, bf16: bool) -> Callable[[], None]:
    """A fresh model and AdamW, built outside; the step closes over them."""
    model = family.build()
    model.train()
    optimizer = torch.optim.AdamW(model.parameters())
    inputs = family.make_inputs(2)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = _first_output(model(**inputs))
        out.float().pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def _measured(workload: Callable[[], Any]) -> int:
    return int(measure_peak_memory(workload).memory.results[0].value)  # type: ignore[union-attr]


def _holds(result: Any, measured: int) -> None:
    """Complete means within 5 % of the real run; a miss must not be complete."""
    close = abs(result.value - measured) <= 0.05 * measured
    assert close or result.status != "complete", (result.value, measured, result.status)
    assert result.status == "complete"  # every family here is fully seen by the fake run


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16_autocast"])
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_step_predicts_the_measured_peak(name: str, bf16: bool) -> None:
    family = FAMILIES[name]
    report = predict_peak_memory(_step(family, bf16), device="cpu")
    assert report.first_step_peak == report.peak and report.headline == "steady_state_peak"
    # first step: one real step of a fresh model and optimizer (measured 2026-12 on torch
    # 2.13, e.g. qwen2 fp32 329,216 B real vs 329,324 B predicted, 1.0003x)
    _holds(report.peak, _measured(_step(family, bf16)))
    steady = _step(family, bf16)

    def two_steps() -> None:
        steady()
        steady()

    # steady state: the peak of two real steps is the second's (AdamW's state lives through
    # its forward and backward), e.g. t5 fp32 312,776 B real vs 312,880 B predicted
    assert report.steady_state_peak is not None
    _holds(report.steady_state_peak, _measured(two_steps))


def test_gpt2_on_cuda_takes_the_memory_efficient_kernel_and_fused_dropout() -> None:
    """GPT-2 in training, fp32: CUDA's SDPA on an sm80 GPU is the memory-efficient kernel
    (flash needs fp16/bf16), with dropout inside it; the CPU would run the math path (its
    flash kernel takes no dropout), keeping each layer's 2 x 4 x 8 x 8 attention matrix."""
    model = GPT2.build()
    model.train()
    inputs = GPT2.make_inputs(2)

    def step() -> None:
        model(**inputs).logits.float().pow(2).mean().backward()

    report = predict_peak_memory(step, device="cuda")
    (diag,) = [d for d in report.diagnostics if d.code == "cuda_attention_backend"]
    assert diag.severity == "warning" and diag.metric == "peak" and diag.count == 2
    assert "GPT2LMHeadModel.transformer.h.0.attn, GPT2LMHeadModel.transformer.h.1.attn" in (
        diag.message
    )
    # two layers' logsumexp [batch 2, heads 4, ceil(8 tokens / 32) * 32 = 32] fp32: 2 x 1,024 B
    assert "2 x memory_efficient" in diag.message and "2,048 bytes of logsumexp" in diag.message
    # dropout: the embeddings' and each block's two residual dropouts, 1 + 2 x 2
    assert any("native_dropout (5 call(s))" in a for a in report.assumptions)
    assert report.peak.status == "complete"
    cpu = predict_peak_memory(step, device="cpu")
    assert not any(d.code.startswith("cuda_") for d in cpu.diagnostics)


def test_autocast_cuda_on_a_cpu_only_torch_is_a_warning_on_the_peak() -> None:
    family = FAMILIES["qwen2"]
    model = family.build()
    inputs = family.make_inputs(2)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = _first_output(model(**inputs))
        out.float().pow(2).mean().backward()

    report = predict_peak_memory(step, device="cuda")
    codes = {d.code: d for d in report.diagnostics}
    assert codes["cuda_autocast_not_run"].severity == "warning"
    assert "test_predict_hf_families.py:" in codes["cuda_autocast_not_run"].message
