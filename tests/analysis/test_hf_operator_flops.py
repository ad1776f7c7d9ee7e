"""measure_flops on Hugging Face architectures built from config (random weights, no download).

For each model: the total is complete, ``product_flops`` is complete and equals a closed form
written here, and the model comes back exactly as found (parameter and buffer values,
training flags, hooks). The closed forms count 2 FLOPs per multiply-add of every tensor
product -- each linear layer ``2 * rows * in * out``, each attention ``q @ k^T`` and
``scores @ v`` ``2 * B * S_q * S_k * width`` apiece (width = heads * head_dim of the
queries; grouped-query attention repeats the KV heads, and masks, causal or sliding-window,
are not discounted) -- and nothing else: norms, activations, softmax, rotary tables and
routing are counted in the total, not in the products.

Small configs (width 32, 2 layers, batch 2, 8 tokens) so each forward takes well under a
second on a loaded 2-core CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch import nn

pytest.importorskip("transformers", reason="the [hf] extra (transformers) is not installed")

from torchscan_stages.analysis.operators import measure_flops
from torchscan_stages.integrations.hf_models import build_hf_model, token_inputs

B, S, V, D, HEADS, FF = 2, 8, 64, 32, 4, 48  # batch, tokens, vocabulary, width, heads, MLP
T = B * S  # 16 token rows through every linear layer
S_DEC = 4  # decoder tokens of the encoder-decoder models
T_DEC = B * S_DEC  # 8 decoder rows
TOKENS = {"bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}


def linear(rows: int, fan_in: int, fan_out: int) -> int:
    return 2 * rows * fan_in * fan_out


def attention(q_len: int, k_len: int, width: int = D) -> int:
    """q @ k^T and scores @ v: 2 * (2 * B * q_len * k_len * width)."""
    return 2 * (2 * B * q_len * k_len * width)


def _tokens() -> dict[str, torch.Tensor]:
    return token_inputs(batch_size=B, seq_len=S, vocab_size=V, seed=1)


def _encoder_decoder_tokens() -> dict[str, torch.Tensor]:
    return {**_tokens(), "decoder_input_ids": _tokens()["input_ids"][:, :S_DEC]}


# GPT-2, per block: c_attn d -> 3d, c_proj d -> d, c_fc d -> 4d, mlp c_proj 4d -> d, attention
#   linear(16, 32, 96) + linear(16, 32, 32) + linear(16, 32, 128) + linear(16, 128, 32)
#   = 98304 + 32768 + 131072 + 131072 = 393216; attention(8, 8) = 16384
#   2 blocks: 2 * (393216 + 16384) = 819200
GPT2 = 2 * (
    linear(T, D, 3 * D) + linear(T, D, D) + linear(T, D, 4 * D) + linear(T, 4 * D, D)
) + 2 * attention(S, S)

# BERT, per layer: q, k, v, o d -> d, intermediate d -> 48, output 48 -> d, attention
#   4 * 32768 + 49152 + 49152 + 16384 = 245760; pooler on the [CLS] rows: linear(2, 32, 32)
#   = 4096; 2 layers: 2 * 245760 + 4096 = 495616
BERT = 2 * (4 * linear(T, D, D) + 2 * linear(T, D, FF) + attention(S, S)) + linear(B, D, D)

# Llama-style GQA, 4 query heads, 2 KV heads of dim 8: q, o d -> d; k, v d -> 16;
# gate, up d -> 48, down 48 -> d; attention over the 4 query heads (width 32)
#   2 * 32768 + 2 * 16384 + 3 * 49152 + 16384 = 262144; 2 layers: 524288
# (the rotary table's (B, 4, 1) @ (B, 1, S) has a contraction of 1: torch runs it as a
# broadcast multiply, which the total counts and the products do not)
LLAMA_ATTENTION = 2 * linear(T, D, D) + 2 * linear(T, D, 16) + attention(S, S)
LLAMA = 2 * (LLAMA_ATTENTION + 3 * linear(T, D, FF))

# Mistral with a 4-token sliding window over 8 tokens: the mask hides scores, the kernel still
# computes them all, so the products are Llama's: 524288
MISTRAL = LLAMA

# Mixtral-style MoE, 4 experts, top-2, on transformers' default (grouped_mm) expert path:
# attention as Llama's (LLAMA_ATTENTION = 65536 + 32768 + 16384 = 114688); router d -> 4:
# linear(16, 32, 4) = 4096; each token runs 2 experts, so 32 rows through gate_up d -> 96
# (linear(32, 32, 96) = 196608) and down 48 -> d (linear(32, 48, 32) = 98304)
#   per layer 114688 + 4096 + 196608 + 98304 = 413696; 2 layers: 827392
MIXTRAL = 2 * (LLAMA_ATTENTION + linear(T, D, 4) + linear(2 * T, D, 2 * FF) + linear(2 * T, FF, D))

# T5 (4 heads of d_kv 8, d_ff 48), 2 encoder + 2 decoder layers, 8 encoder / 4 decoder tokens:
#   encoder layer: 4 * linear(16, 32, 32) + linear(16, 32, 48) + linear(16, 48, 32)
#     + attention(8, 8) = 131072 + 98304 + 16384 = 245760
#   decoder layer: self 4 * linear(8, 32, 32) + attention(4, 4) = 65536 + 4096
#     cross q, o from the decoder 2 * linear(8, 32, 32) = 32768, k, v from the encoder
#     2 * linear(16, 32, 32) = 65536, attention(4, 8) = 8192; ff 2 * 24576 = 49152
#     = 225280;  2 * 245760 + 2 * 225280 = 942080
ENCODER_LAYER = 4 * linear(T, D, D) + linear(T, D, FF) + linear(T, FF, D) + attention(S, S)
DECODER_LAYER = (
    4 * linear(T_DEC, D, D)
    + attention(S_DEC, S_DEC)
    + 2 * linear(T_DEC, D, D)
    + 2 * linear(T, D, D)
    + attention(S_DEC, S)
    + linear(T_DEC, D, FF)
    + linear(T_DEC, FF, D)
)
T5 = 2 * ENCODER_LAYER + 2 * DECODER_LAYER

# ViT, 16x16 image, 4x4 patches: 16 patches + [CLS] = 17 tokens, 34 rows
#   patch conv: 2 * B2 * 16 positions * 32 out * (3 * 4 * 4) in = 98304
#   layer: 4 * linear(34, 32, 32) + linear(34, 32, 48) + linear(34, 48, 32) + attention(17, 17)
#     = 278528 + 104448 + 104448 + 73984 = 561408 (x 2 layers); pooler linear(2, 32, 32) = 4096
#   98304 + 1122816 + 4096 = 1225216
VIT_ROWS = B * 17
VIT = (
    2 * B * 16 * D * (3 * 4 * 4)
    + 2
    * (
        4 * linear(VIT_ROWS, D, D)
        + linear(VIT_ROWS, D, FF)
        + linear(VIT_ROWS, FF, D)
        + attention(17, 17)
    )
    + linear(B, D, D)
)

# Whisper, 8 mel bins x 16 frames (max_source_positions 8): conv1 8 -> 32, k3, 16 positions:
# 2 * 2 * 32 * 8 * 3 * 16 = 49152; conv2 32 -> 32, k3, stride 2, 8 positions: 2 * 2 * 32 * 32
# * 3 * 8 = 98304; then the encoder (8 frames, 16 rows) and decoder layers as T5's:
#   147456 + 2 * 245760 + 2 * 225280 = 1089536
WHISPER = 2 * B * D * 8 * 3 * 16 + 2 * B * D * D * 3 * 8 + 2 * ENCODER_LAYER + 2 * DECODER_LAYER


@dataclass(frozen=True)
class Case:
    config_class: str
    config: dict[str, Any]
    inputs: Callable[[], dict[str, torch.Tensor]]
    products: int
    value: int  # the closed form, evaluated (a second check on the arithmetic above)


LLAMA_CONFIG = {
    "vocab_size": V,
    "hidden_size": D,
    "num_hidden_layers": 2,
    "num_attention_heads": HEADS,
    "num_key_value_heads": 2,
    "intermediate_size": FF,
    "max_position_embeddings": 16,
    **TOKENS,
}
CASES = {
    "gpt2": Case(
        "GPT2Config",
        {"vocab_size": V, "n_embd": D, "n_layer": 2, "n_head": HEADS, "n_positions": 16}
        | {"bos_token_id": 0, "eos_token_id": 0},
        _tokens,
        GPT2,
        819200,
    ),
    "bert": Case(
        "BertConfig",
        {
            "vocab_size": V,
            "hidden_size": D,
            "num_hidden_layers": 2,
            "num_attention_heads": HEADS,
            "intermediate_size": FF,
            "max_position_embeddings": 16,
            "pad_token_id": 0,
        },
        _tokens,
        BERT,
        495616,
    ),
    "llama-gqa": Case("LlamaConfig", LLAMA_CONFIG, _tokens, LLAMA, 524288),
    "mistral-sliding-window": Case(
        "MistralConfig", LLAMA_CONFIG | {"sliding_window": 4}, _tokens, MISTRAL, 524288
    ),
    "mixtral-moe": Case(
        "MixtralConfig",
        LLAMA_CONFIG | {"num_local_experts": 4, "num_experts_per_tok": 2},
        _tokens,
        MIXTRAL,
        827392,
    ),
    "t5": Case(
        "T5Config",
        {
            "vocab_size": V,
            "d_model": D,
            "d_kv": 8,
            "d_ff": FF,
            "num_layers": 2,
            "num_decoder_layers": 2,
            "num_heads": HEADS,
            "pad_token_id": 0,
            "eos_token_id": 1,
        },
        _encoder_decoder_tokens,
        T5,
        942080,
    ),
    "vit": Case(
        "ViTConfig",
        {
            "hidden_size": D,
            "num_hidden_layers": 2,
            "num_attention_heads": HEADS,
            "intermediate_size": FF,
            "image_size": 16,
            "patch_size": 4,
            "num_channels": 3,
        },
        lambda: {
            "pixel_values": torch.randn(B, 3, 16, 16, generator=torch.Generator().manual_seed(0))
        },
        VIT,
        1225216,
    ),
    "whisper": Case(
        "WhisperConfig",
        {
            "vocab_size": V,
            "d_model": D,
            "encoder_layers": 2,
            "decoder_layers": 2,
            "encoder_attention_heads": HEADS,
            "decoder_attention_heads": HEADS,
            "encoder_ffn_dim": FF,
            "decoder_ffn_dim": FF,
            "num_mel_bins": 8,
            "max_source_positions": 8,
            "max_target_positions": 16,
            "pad_token_id": 0,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "decoder_start_token_id": 1,
            "suppress_tokens": [],
            "begin_suppress_tokens": [],
        },
        lambda: {
            "input_features": torch.randn(B, 8, 16, generator=torch.Generator().manual_seed(0)),
            "decoder_input_ids": _tokens()["input_ids"][:, :S_DEC],
        },
        WHISPER,
        1089536,
    ),
}


def _snapshot(model: nn.Module) -> dict[str, Any]:
    """Everything measure_flops could leave behind on a model."""
    return {
        "state": {k: v.detach().clone() for k, v in model.state_dict(keep_vars=True).items()},
        "training": [m.training for m in model.modules()],
        "hooks": [
            (
                len(m._forward_hooks),
                len(m._forward_pre_hooks),
                len(m._backward_hooks),
                len(m._backward_pre_hooks),
            )
            for m in model.modules()
        ],
        "grads": [p.grad is None for p in model.parameters()],
        "global_hooks": (
            len(nn.modules.module._global_forward_hooks),
            len(nn.modules.module._global_forward_pre_hooks),
            len(nn.modules.module._global_forward_hooks_always_called),
            len(nn.modules.module._global_backward_hooks),
        ),
        "grad_mode": torch.is_grad_enabled(),
    }


def _assert_as_found(model: nn.Module, before: dict[str, Any]) -> None:
    after = _snapshot(model)
    assert after["state"].keys() == before["state"].keys()
    for key, value in before["state"].items():
        assert torch.equal(after["state"][key], value), key
    for key in ("training", "hooks", "grads", "global_hooks", "grad_mode"):
        assert after[key] == before[key], key


@pytest.mark.parametrize("name", list(CASES))
def test_hf_products_equal_the_closed_form(name: str) -> None:
    case = CASES[name]
    assert case.products == case.value  # the closed form above, evaluated
    model = build_hf_model(case.config_class, **case.config)
    inputs = case.inputs()
    before = _snapshot(model)

    def forward() -> None:
        with torch.no_grad():
            model(**inputs)

    report = measure_flops(forward)
    assert report.total.is_complete, [d.message for d in report.diagnostics]
    assert report.product_flops is not None and report.product_flops.is_complete
    assert report.product_flops.value == case.products
    assert report.total.value is not None and report.total.value > case.products
    _assert_as_found(model, before)


def test_mixtral_default_expert_path_runs_grouped_mm_and_routing() -> None:
    """transformers' default expert path on the CPU: sort, histc and grouped_mm, all counted."""
    model = build_hf_model("MixtralConfig", **CASES["mixtral-moe"].config)
    assert model.config._experts_implementation == "grouped_mm"
    inputs = _tokens()
    with torch.no_grad():
        report = measure_flops(lambda: model(**inputs))
    by_op = report.by_operator
    # per layer: gate_up and down; 2 layers -> 4 calls, 2 * (196608 + 98304) = 589824
    assert by_op["aten._grouped_mm"].calls == 4
    assert by_op["aten._grouped_mm"].flops.value == 2 * (196608 + 98304)
    # routing, per layer: topk over 16 tokens x 4 experts = 64 comparisons; sort of the
    # 32 chosen expert ids, 32 * ceil(log2 32)=5 = 160; histc of 32 ids = 32
    assert by_op["aten.topk"].flops.value == 2 * 64
    assert by_op["aten.sort"].flops.value == 2 * 160
    assert by_op["aten.histc"].flops.value == 2 * 32


def test_mixtral_training_step_products_through_grouped_mm_backward() -> None:
    """Forward + backward on transformers' default expert path: every linear and grouped
    product runs three times (forward, grad_input, grad_weight); the CPU flash attention runs
    its 2 products forward and torch's 5 backward (the scores recomputed)."""
    model = build_hf_model("MixtralConfig", **CASES["mixtral-moe"].config).train()
    inputs = _tokens()
    before = _snapshot(model)
    report = measure_flops(lambda: model(**inputs).last_hidden_state.sum().backward())
    attention_forward = attention(S, S)  # 16384 = 2 products of 8192
    # linear + grouped products: 827392 - 2 * 16384 = 794624, three times: 2383872
    # attention per layer: 16384 forward + 5 * 8192 backward = 57344, 2 layers: 114688
    products = 3 * (MIXTRAL - 2 * attention_forward) + 2 * (
        attention_forward + 5 * attention_forward // 2
    )
    assert products == 2498560
    assert report.total.is_complete, [d.message for d in report.diagnostics]
    assert report.product_flops is not None and report.product_flops.value == products
    # 2 layers x (2 forward + 4 backward) grouped products
    assert report.by_operator["aten._grouped_mm"].calls == 12
    model.zero_grad(set_to_none=True)  # the workload's own gradients, not the counter's
    _assert_as_found(model, before)
