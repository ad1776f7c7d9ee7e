"""Hugging Face families no issue named, as a new user builds them (small configs, no download,
no user code): module MACs complete, product FLOPs complete in forward and in training, every
handler failure named; and the defects these families showed, each with its own test."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from torchscan_stages import ModuleHandler, crawl_module, measure_flops

pytest.importorskip("transformers")

from torchscan_stages.integrations.hf_families import FAMILIES, L, build_family


def _first_float(output: Any) -> torch.Tensor:
    values = output if isinstance(output, tuple) else output.values()
    return next(v for v in values if isinstance(v, torch.Tensor) and v.is_floating_point())


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_is_complete_with_no_user_code(name: str) -> None:
    model, make_inputs = build_family(name)
    inputs = make_inputs()
    report = crawl_module(model, kwargs=inputs)
    failures = [d for d in report.diagnostics if d.code == "handler_failed"]
    assert not failures, [d.message for d in failures]
    assert report.totals.macs.is_complete, [
        d.message for d in report.diagnostics if "macs" in (d.metric or "")
    ]
    assert report.totals.operator_flops.is_complete
    with torch.no_grad():
        forward = measure_flops(lambda: model(**inputs))
    assert forward.total.is_complete and forward.product_flops is not None
    assert forward.product_flops.is_complete
    products, macs = forward.product_flops.value, report.totals.macs.value
    assert products is not None and macs is not None
    # 2 FLOPs per multiply-add; the module formulas add the norms' affine multiply-adds
    # (1 MAC per element: up to 1.5 % at width 32, 3.6 % on ConvNeXt-V2's width-8 to 32
    # LayerNorms and GRNs), never fewer MACs than products
    assert products <= 2 * macs <= 1.04 * products
    model.train()
    try:
        training = measure_flops(lambda: _first_float(model(**inputs)).sum().backward())
    finally:
        model.zero_grad(set_to_none=True)
        model.eval()
    assert training.total.is_complete, [d.message for d in training.diagnostics]
    assert training.product_flops is not None and training.product_flops.is_complete


def test_dbrx_router_and_experts_are_not_claimed_by_name() -> None:
    """DbrxRouter holds a Linear (no ``weight``), DbrxExperts a GLU child (no 3-D
    ``up_proj``): the name-suffix handlers would raise, so they must not claim them."""
    model, make_inputs = build_family("dbrx")
    report = crawl_module(model, kwargs=make_inputs())
    records = {r.path: r for r in report.layers}
    router = records["transformer.blocks.0.ffn.router"]
    experts = records["transformer.blocks.0.ffn.experts"]
    assert router.handler is None and experts.handler is None
    assert not [d for d in report.diagnostics if d.code == "handler_failed"]
    # the router's Linear child: 8 tokens x 32 wide x 4 experts = 1,024 MACs; the router's own
    # softmax / top-k / renormalising do no multiply-accumulate
    assert router.metrics.macs.value == L * 32 * 4 == 1_024
    # DbrxExpertGLU runs w1, v1 (32 -> 32) and w2 (32 -> 32) as mm per chosen expert:
    # 8 tokens x top-2 = 16 rows x 3 x 32 x 32 = 49,152 MACs
    assert experts.metrics.macs.value == 16 * 3 * 32 * 32 == 49_152


def test_pegasus_sinusoidal_positions_get_the_embedding_formula() -> None:
    """PegasusSinusoidalPositionalEmbedding(nn.Embedding) takes the input *shape*: the
    built-in embedding handler asserted with an empty message; it now reads the rows it
    looked up from its output."""
    model, make_inputs = build_family("pegasus")
    report = crawl_module(model, kwargs=make_inputs())
    record = next(r for r in report.layers if r.path == "encoder.embed_positions")
    assert record.handler is not None and "embedding" in record.handler
    metrics = record.metrics
    # 8 positions looked up, each a row of 32 read and written: 8 + 2 x 256 = 520 elements
    assert (metrics.module_flops.value, metrics.macs.value, metrics.dmas.value) == (0, 0, 520)


class _Picky(nn.Linear):
    """A Linear subclass a custom handler claims only when it has no bias."""


def _bad(ctx: Any) -> dict[str, Any]:
    raise AssertionError


def test_a_handler_that_does_not_fit_falls_through_to_the_next_candidate() -> None:
    custom = {_Picky: ModuleHandler(_bad, accepts=lambda m: m.bias is None, name="picky")}
    model = nn.Sequential(_Picky(4, 3), _Picky(3, 2, bias=False))
    report = crawl_module(model, (4,), custom_modules=custom)
    records = {r.path: r for r in report.layers}
    assert records["0"].handler == "linear"  # has a bias: the built-in Linear formula
    assert records["0"].metrics.macs.value == 4 * 3  # 12 multiply-adds
    failure = next(d for d in report.diagnostics if d.code == "handler_failed")
    # the bare AssertionError still gives a message naming path, handler and expectation
    assert failure.path == "1"
    assert "handler picky for _Picky at 1" in failure.message
    assert "AssertionError: (no message)" in failure.message
    assert "it expects" in failure.message


def test_accepts_must_be_callable() -> None:
    with pytest.raises(TypeError, match=r"ModuleHandler\(accepts=...\) must be callable"):
        ModuleHandler(_bad, accepts=True)  # type: ignore[arg-type]


def test_llava_and_encodec_training_products_are_known() -> None:
    """aten._is_all_true (Llava's image-token check), masked_scatter_backward (Llava
    training) and reflection_pad1d_backward (Encodec training) have a known product share."""
    for name, operator in (
        ("llava", "aten._is_all_true"),
        ("encodec", "aten.reflection_pad1d_backward"),
    ):
        model, make_inputs = build_family(name)
        inputs = make_inputs()
        model.train()
        report = measure_flops(lambda: _first_float(model(**inputs)).sum().backward())  # noqa: B023
        model.zero_grad(set_to_none=True)
        assert report.product_flops is not None and report.product_flops.is_complete, name
        seen = set(report.by_operator) | {i.operator for i in report.ignored_operators}
        assert operator in seen, (name, sorted(seen))


def test_reflection_pad_backward_adds_one_per_padded_position() -> None:
    x = torch.randn(2, 3, 10, requires_grad=True)
    report = measure_flops(lambda: nn.functional.pad(x, (2, 3), mode="reflect").sum().backward())
    # 2 x 3 rows, 15 padded positions onto 10: 5 gradient adds per row -> 30
    assert report.by_operator["aten.reflection_pad1d_backward"].flops.value == 2 * 3 * 5 == 30
    assert report.product_flops is not None and report.product_flops.value == 0


def test_convnextv2_grn_and_deepseek_latent_attention_by_hand() -> None:
    model, make_inputs = build_family("convnextv2")
    records = {r.path: r for r in crawl_module(model, kwargs=make_inputs()).layers}
    grn = records["encoder.stages.0.layers.0.grn"]
    assert grn.handler is not None and "grn" in grn.handler
    # after pwconv1 (8 -> 4 x 8 channels) x is (1, 8, 8, 32): n = 2,048, B*C = 32, B = 1.
    # FLOPs: norm 2n + 32 sqrt, channel mean 32 + 2, divide 32, weight * (x * n) + bias + x
    # 4n -> 6 * 2,048 + 3 * 32 + 2 = 12,386; MACs: the affine, 1 per element = 2,048;
    # DMAs: 2,048 in + 2,048 out + 2 x 32 parameters = 4,160
    metrics = grn.metrics
    assert (metrics.module_flops.value, metrics.macs.value, metrics.dmas.value) == (
        12_386,
        2_048,
        4_160,
    )
    model, make_inputs = build_family("deepseek_v3")
    records = {r.path: r for r in crawl_module(model, kwargs=make_inputs()).layers}
    attention = records["model.layers.0.self_attn"]
    assert attention.handler is not None and "attention" in attention.handler
    # own products: 4 heads x 8 x 8 scores x (qk_head_dim 8 + v_head_dim 8) = 4,096 MACs;
    # FLOPs 2 x 4,096 + 6 per score (scaling, softmax) x 256 scores = 9,728 (no mask passed)
    names = ["q_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_proj_with_mqa", "kv_a_layernorm"]
    children = sum(
        records[f"model.layers.0.self_attn.{name}"].metrics.macs.value  # type: ignore[misc]
        for name in [*names, "kv_b_proj", "o_proj"]
    )
    assert attention.metrics.macs.value == 4_096 + children


def test_mamba2_root_params_and_encodec_weight_norm_records() -> None:
    import io

    from torchscan_stages import summary

    model, make_inputs = build_family("mamba2")
    out = io.StringIO()
    report = summary(model, kwargs=make_inputs(), file=out)
    lines = out.getvalue().splitlines()
    column = lines[1].index("Params") + len("Params")
    total = sum(p.numel() for p in model.parameters())  # each tensor once
    # root cell (compact form) equals the footer's total of every parameter
    footer = next(line for line in lines if line.startswith("Parameters: "))
    assert lines[3][:column].split()[-1] == footer.split()[1].rstrip()
    assert report.totals.parameters.value == total
    model, make_inputs = build_family("encodec")
    report = crawl_module(model, kwargs=make_inputs())
    types = [r.type for r in report.layers]
    assert "_WeightNorm" not in types and "ParametrizationList" not in types
    convs = [r for r in report.layers if r.type.startswith("Parametrized")]
    # every weight-normed convolution: its weight norm's FLOPs inside a complete record
    assert convs and all(r.metrics.module_flops.is_complete for r in convs)
    assert report.totals.parameters.value == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "config_class",
    ["Gemma3TextConfig", "Llama4TextConfig", "ModernBertConfig", "DPTConfig", "MobileViTConfig"],
)
def test_survey_families_once_partial_are_complete(config_class: str) -> None:
    """The survey's small configs of the families whose MACs were partial: Gemma-3 and
    ModernBERT's rotary tables (no ``inv_freq``) and Llama-4's experts (called with the
    hidden states alone) no longer claimed by name; DPT and MobileViT's own bilinear
    interpolation at nn.Upsample's MACs."""
    from benchmarks.survey_hf import _build_any

    model, inputs = _build_any(config_class)
    report = crawl_module(model, kwargs=inputs)
    assert not [d for d in report.diagnostics if d.code == "handler_failed"]
    assert report.totals.macs.is_complete


def test_family_layer_norm_and_gated_rms_norm_by_hand() -> None:
    model, make_inputs = build_family("cohere")
    records = {r.path: r for r in crawl_module(model, kwargs=make_inputs()).layers}
    norm = records["model.layers.0.input_layernorm"]
    assert norm.handler is not None and "family norm" in norm.handler
    # LayerNorm of 8 rows x 32, weight only: statistics 4/elem + 2/row, normalise 2/elem +
    # 2/row, weight 1/elem -> 7 x 256 + 4 x 8 = 1,824; no bias: 0 MACs
    metrics = norm.metrics
    assert (metrics.module_flops.value, metrics.macs.value) == (1_824, 0)
    model, make_inputs = build_family("mamba2")
    records = {r.path: r for r in crawl_module(model, kwargs=make_inputs()).layers}
    gated = records["backbone.layers.0.mixer.norm"]
    assert gated.handler is not None and "family norm" in gated.handler
    # x (1, 8, 64) in 1 group of 64 per row: RMS statistics 2/elem + 1/group, normalise
    # 1/elem + 2/group, weight 1/elem -> 4 x 512 + 3 x 8 = 2,072; gate SiLU and product
    # 6 x 512 = 3,072 -> 5,144; 0 MACs
    metrics = gated.metrics
    assert (metrics.module_flops.value, metrics.macs.value) == (2_072 + 3_072, 0)
