"""Whole-model analysis without data (meta, FakeTensorMode), compiled and scripted models,
and a Llama-style 70B decoder analysed and predicted on shapes alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from predict_models import LLAMA_70B, SMALL, Decoder, decoder_parameters, mixed_precision_step
from torch._subclasses.fake_tensor import FakeTensorMode

from torchscan_stages import crawl_module, measure_flops
from torchscan_stages.predict import predict_peak_memory
from torchscan_stages.zoo import image_batch, small_resnet


def _analyse(build: Callable[[], torch.nn.Module], make: Callable[[], torch.Tensor], where: str):  # type: ignore[no-untyped-def]
    def both() -> tuple[Any, Any]:
        model, x = build(), make()
        return crawl_module(model, args=(x,)), measure_flops(lambda: model(x))

    if where == "fake":
        with FakeTensorMode():
            return both()
    if where == "meta":
        with torch.device("meta"):
            return both()
    return both()


def _totals(report: Any) -> dict[str, tuple[str, Any]]:
    return {name: (r.status, r.known_value) for name, r in report.totals}


MODELS = {
    "cnn": (small_resnet, lambda: image_batch()[0]),
    "decoder": (lambda: Decoder(SMALL), lambda: torch.randint(0, SMALL.vocab, (2, 32))),
}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_fake_tensors_give_the_cpu_totals(model: str) -> None:
    build, make = MODELS[model]
    cpu_crawl, cpu_flops = _analyse(build, make, "cpu")
    fake_crawl, fake_flops = _analyse(build, make, "fake")
    assert _totals(fake_crawl) == _totals(cpu_crawl)
    assert fake_flops.total == cpu_flops.total
    assert fake_flops.product_flops == cpu_flops.product_flops
    for report in (fake_crawl, fake_flops):
        notes = [d for d in report.diagnostics if d.code == "ran_without_data"]
        assert len(notes) == 1 and "fake tensors" in notes[0].message
    for report in (cpu_crawl, cpu_flops):
        assert all(d.code != "ran_without_data" for d in report.diagnostics)


def test_meta_gives_the_cpu_totals_and_says_where_it_cannot() -> None:
    build, make = MODELS["cnn"]
    cpu_crawl, cpu_flops = _analyse(build, make, "cpu")
    meta_crawl, meta_flops = _analyse(build, make, "meta")
    assert _totals(meta_crawl) == _totals(cpu_crawl)
    assert meta_flops.total == cpu_flops.total
    # attention: meta has no fused kernel, SDPA runs its math decomposition there; products
    # and parameters are the same, the all-work count may differ, and the note says so
    build, make = MODELS["decoder"]
    cpu_crawl, cpu_flops = _analyse(build, make, "cpu")
    meta_crawl, meta_flops = _analyse(build, make, "meta")
    assert meta_crawl.totals.parameters == cpu_crawl.totals.parameters
    assert meta_flops.product_flops == cpu_flops.product_flops
    note = next(d for d in meta_flops.diagnostics if d.code == "ran_without_data")
    assert "math decomposition" in note.message


def test_compiled_module_is_analysed_through_the_module_it_wraps() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
    x = torch.randn(2, 8)
    compiled = torch.compile(model, backend="eager")
    plain = crawl_module(model, args=(x,))
    through = crawl_module(compiled, args=(x,))
    assert [layer.path for layer in through.layers] == [layer.path for layer in plain.layers]
    assert _totals(through) == _totals(plain)
    codes = [d.code for d in through.diagnostics]
    assert "compiled_module_unwrapped" in codes


def test_scripted_module_says_what_is_and_is_not_measured() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
    x = torch.randn(2, 8)
    with pytest.warns(DeprecationWarning, match="torch.jit.script"):  # torch 2.13 deprecates it
        scripted = torch.jit.script(model)
    report = crawl_module(scripted, args=(x,))
    note = next(d for d in report.diagnostics if d.code == "torchscript_module")
    assert "Not measured: per-layer records" in note.message
    # operators still pass through dispatch: the same operator FLOPs as the eager module;
    # parameters: weight 8*4 + bias 4 = 36
    assert report.totals.parameters.value == 8 * 4 + 4
    assert (
        report.totals.operator_flops.value
        == crawl_module(model, args=(x,)).totals.operator_flops.value
    )
    assert report.totals.module_flops.status != "complete"  # never a silent number


# ----------------------------------------------------------------------------- 70B on meta

T = 2048  # sequence length, batch 1


def _llama_linear_parameters() -> int:
    """Every Linear weight (no embedding, no norms): the parameters a token multiplies."""
    s = LLAMA_70B
    kv = s.kv_heads * (s.dim // s.heads)
    return s.layers * (2 * s.dim * s.dim + 2 * s.dim * kv + 3 * s.dim * s.hidden) + s.dim * s.vocab


@pytest.mark.slow
def test_llama_70b_counts_and_predicted_step_on_shapes_alone() -> None:
    s = LLAMA_70B
    with torch.device("meta"):
        model = Decoder(s)
        tokens = torch.randint(0, s.vocab, (1, T))
    parameters = sum(p.numel() for p in model.parameters())
    # closed form: 2*V*d + L*(2d^2 + 2*d*kv + 3*d*f + 2d) + d = 70,553,706,496
    assert parameters == decoder_parameters(s) == 70_553_706_496
    with torch.no_grad():
        flops = measure_flops(lambda: model(tokens))
    # products: 2*T per multiplied weight, plus attention's two T x T products per head
    # (QK^T and AV: 2 * 2*T*T*head_dim each head, causal counted in full)
    expected = 2 * T * _llama_linear_parameters() + s.layers * 4 * s.heads * T * T * (
        s.dim // s.heads
    )
    assert flops.product_flops is not None and flops.product_flops.value == expected
    assert any(d.code == "ran_without_data" for d in flops.diagnostics)

    def step() -> None:  # bf16 weights and gradients, fp32 masters and AdamW moments
        mixed_precision_step(s, batch=1, tokens=T)

    report = predict_peak_memory(step, device="cuda")
    parts = {name: r.value for name, r in report.by_category.items()}
    n = decoder_parameters(s)
    # every tensor of this shape is a multiple of 512 bytes, so the blocks add no rounding:
    # bf16 weights 2N; at the step the bf16 gradients are freed and the fp32 master
    # gradients 4N remain; optimizer state = fp32 master weights 4N + AdamW's fp32 exp_avg
    # and exp_avg_sq 8N = 12N (its step counters stay on the host: 0 bytes)
    assert parts["parameters"] == 2 * n == 141_107_412_992
    assert parts["gradients"] == 4 * n
    assert parts["optimizer_state"] == 12 * n
    assert report.phase_at_peak == "optimizer_step"
    assert report.peak.status == "complete"
    # device="cuda" takes AdamW's CUDA default, foreach: its denominator
    # _foreach_sqrt(exp_avg_sq) is one more fp32 tensor per parameter, 4N of temporaries
    assert parts["temporaries"] == 4 * n
    assert report.peak.value == 22 * n + parts["other"]  # 2N + 4N + 12N + 4N = 22N
