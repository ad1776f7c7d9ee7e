"""measure_flops and generation_cost of ``model.generate`` on HF decoders built from config.

Closed forms count the tensor products (2 FLOPs per multiply-add; see
test_hf_operator_flops.py for the convention): a forward call that takes ``q`` new tokens per
sequence with ``k`` keys in its attention runs every linear layer on ``B * q`` rows, the two
attention products ``2 * (2 * B * q * k * width)`` per layer, and the LM head on the last
token of each sequence only (generate asks for ``logits_to_keep=1``). Generating N tokens
runs N forward calls: the prefill (q = k = S), then decode steps t = 1 .. N-1 (q = 1,
k = S + t: the cache holds S + t - 1 tokens and the step adds its own). For Llama the whole
total is written out too (``llama_call_total`` and ``GENERATE_OWN``).

Tiny configs (width 32, 2 layers, vocabulary 64, batch 2, 8 prompt tokens, 4 new tokens):
each generate runs in well under a second on a loaded 2-core CPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

pytest.importorskip("transformers", reason="the [hf] extra (transformers) is not installed")

from torchscan_stages.analysis.operators import measure_flops
from torchscan_stages.integrations.hf_models import build_hf_model, token_inputs
from torchscan_stages.serve.generation import generation_cost

ROOT = Path(__file__).resolve().parents[2]
B, S, N, V, D, FF, LAYERS = 2, 8, 4, 64, 32, 48, 2  # batch, prompt, new tokens, vocab, ...
KV_WIDTH = 16  # 2 KV heads x head_dim 8 (4 query heads of 8)
TOKENS = {"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 0}
DECODER = {
    "vocab_size": V,
    "hidden_size": D,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": 4,
    "intermediate_size": FF,
    "max_position_embeddings": 64,
    **TOKENS,
}
GQA = DECODER | {"num_key_value_heads": 2}
GENERATE = {"max_new_tokens": N, "min_new_tokens": N, "do_sample": False}


def linear(rows: int, fan_in: int, fan_out: int) -> int:
    return 2 * rows * fan_in * fan_out


def attention(q: int, k: int) -> int:
    """q @ k^T and scores @ v over the 4 query heads (width 32): 2 * (2 * B * q * k * 32)."""
    return 2 * (2 * B * q * k * D)


def llama_call(q: int, k: int) -> int:
    """Llama / Qwen2 with GQA: q, o d -> d; k, v d -> 16; gate, up d -> 48, down 48 -> d; per
    layer on B*q rows; the LM head d -> V on the B last tokens."""
    rows = B * q
    layer = 2 * linear(rows, D, D) + 2 * linear(rows, D, KV_WIDTH) + 3 * linear(rows, D, FF)
    return LAYERS * (layer + attention(q, k)) + linear(B, D, V)


def neox_call(q: int, k: int) -> int:
    """GPT-NeoX: fused query_key_value d -> 3d, dense d -> d, h_to_4h d -> 48, 4h_to_h 48 -> d."""
    rows = B * q
    layer = linear(rows, D, 3 * D) + linear(rows, D, D) + 2 * linear(rows, D, FF)
    return LAYERS * (layer + attention(q, k)) + linear(B, D, V)


def generate_products(call, keys_at_step) -> int:
    """Prefill (q = k = S) + decode steps t = 1 .. N-1 (q = 1, k = keys_at_step(t))."""
    return call(S, S) + sum(call(1, keys_at_step(t)) for t in range(1, N))


# Llama, dynamic cache: prefill llama_call(8, 8) = 532480;
# decode t=1..3: llama_call(1, 9 / 10 / 11) = 74240 + 74752 + 75264 = 224256; sum 756736
LLAMA_GENERATE = generate_products(llama_call, lambda t: S + t)
# GPT-NeoX: prefill 501760 + decode 69632 + 70144 + 70656 = 711680
NEOX_GENERATE = generate_products(neox_call, lambda t: S + t)
# the end-of-sequence checks (aten.isin, n*m comparisons): generate's special-token check
# isin((1,), ()) = 1; per new token MinLength and MinNewTokens processors isin((64,), (1,))
# twice and the stopping criterion isin((2, 1), (1,)): 4 * (64 + 64 + 2) = 520; 521 in all
ISIN = 1 + N * (V + V + B)


def llama_call_total(q: int, k: int) -> int:
    """Every FLOP of one Llama forward call, not only its products (docs/operator-flops.md:
    1 per element of each elementwise op, a reduction 1 per input element, mean +1 per row,
    attention's softmax 5 per score and its q / k scaling 1 per element). Rows R = B * q,
    head_dim 8, 4 query heads and 2 KV heads (6 heads of rotary embedding per token):

    * RMSNorm (2 per layer + the final one): pow R*D, mean R*D + R, + eps R, rsqrt R, two
      multiplies 2*R*D: 4*R*D + 3*R;
    * rotary embedding of q and k: x*cos, rotate_half(x)*sin, their sum, and the negated half:
      3.5 per element of the 6 heads: 3 * B*q*8*6 + B*q*4*6;
    * attention beyond its products: 5 * B*4*q*k (softmax) + B*4*q*8 (q scaling) + B*2*k*8
      (k scaling, the KV heads: no repeat);
    * SwiGLU's silu and multiply 2 * R*FF; the two residual adds 2 * R*D;
    * once per call, the rotary tables: inv_freq x positions B*q*4 (a broadcast multiply),
      cos and sin, each scaled by attention_scaling: 4 * B*q*8.
    """
    rows = B * q
    norm = 4 * rows * D + 3 * rows
    rotary = 3 * B * q * 8 * 6 + B * q * 4 * 6
    attention_rest = 5 * B * 4 * q * k + B * 4 * q * 8 + B * 2 * k * 8
    layer = 2 * norm + rotary + attention_rest + 2 * rows * FF + 2 * rows * D
    return llama_call(q, k) + LAYERS * layer + norm + B * q * 4 + 4 * B * q * 8


# generate's own work (greedy search, transformers 5.23): once, the special-token checks
# (isin 1, any 1, lt 1, any 1), the pad check on the prompt (eq B, any B), the position ids
# (cumsum, sub, eq: 3 * B*S), the all-ones mask check (eq, all: 2 * B*S) and the
# logits-processor check (lt, any: 2 * B*S): 4 + 2*B + 7*B*S = 4 + 4 + 112 = 120; then per new
# token: the attention mask's extension (2 adds of B), the min-length processors' isin 2*V,
# argmax over the vocabulary B*V, the finished-sequence padding (mul, rsub, mul, add: 4*B),
# the stopping criteria (or, isin, any, or: 4*B), unfinished &= ~stop (2*B) and its max +
# the == 0 test (B + 1): 13*B + 2*V + B*V + 1 = 26 + 128 + 128 + 1 = 283, x 4 = 1132
GENERATE_OWN = 4 + 2 * B + 7 * B * S + N * (13 * B + 2 * V + B * V + 1)


@pytest.fixture(scope="module")
def llama() -> nn.Module:
    return build_hf_model("LlamaConfig", model_class="AutoModelForCausalLM", **GQA)


@pytest.fixture(scope="module")
def prompt() -> dict[str, torch.Tensor]:
    return token_inputs(batch_size=B, seq_len=S, vocab_size=V, seed=1)


@pytest.mark.parametrize(
    ("config_class", "config", "products"),
    [
        ("Qwen2Config", GQA, LLAMA_GENERATE),  # q/k/v biases: added, not products
        ("GPTNeoXConfig", DECODER, NEOX_GENERATE),
    ],
)
def test_generate_flops_complete_for_families(
    config_class: str, config: dict, products: int, prompt: dict[str, torch.Tensor]
) -> None:
    assert (LLAMA_GENERATE, NEOX_GENERATE) == (756736, 711680)  # the closed forms, evaluated
    model = build_hf_model(config_class, model_class="AutoModelForCausalLM", **config)
    report = measure_flops(lambda: model.generate(**prompt, **GENERATE))
    assert report.total.is_complete, [d.message for d in report.diagnostics]
    assert report.product_flops is not None and report.product_flops.value == products
    assert report.by_operator["aten.isin"].flops.value == ISIN == 521


def test_llama_generate_split_equals_prefill_plus_decode(
    llama: nn.Module, prompt: dict[str, torch.Tensor]
) -> None:
    hooks_before = _hook_counts(llama)
    report = measure_flops(lambda: llama.generate(**prompt, **GENERATE))
    assert report.total.is_complete and report.product_flops is not None
    assert report.product_flops.value == LLAMA_GENERATE == 756736
    assert report.by_operator["aten.isin"].flops.value == ISIN

    # the whole count in closed form: prefill 560688, decode steps 78358 / 79014 / 79670,
    # generate's own 1252: 798982
    calls = [llama_call_total(S, S), *(llama_call_total(1, S + t) for t in range(1, N))]
    assert calls == [560688, 78358, 79014, 79670] and GENERATE_OWN == 1252
    assert report.total.value == sum(calls) + GENERATE_OWN == 798982

    cost = generation_cost(llama, lambda: llama.generate(**prompt, **GENERATE))
    assert _hook_counts(llama) == hooks_before
    assert [call.flops.value for call in cost.calls] == calls
    assert cost.outside_flops.value == GENERATE_OWN
    # one counted run, the same count as measure_flops': every operator filed under one call
    assert cost.total == report.total
    parts = [call.flops.value for call in cost.calls] + [cost.outside_flops.value]
    assert sum(parts) == report.total.value
    assert (cost.batch_size, cost.prompt_tokens, len(cost.calls)) == (B, S, N)
    assert [c.input_tokens for c in cost.calls] == [S, 1, 1, 1]
    # products per call: prefill 532480, decode 74240 / 74752 / 75264 (keys 9, 10, 11)
    assert (
        [c.product_flops.value for c in cost.calls]
        == [
            llama_call(S, S),
            *(llama_call(1, S + t) for t in range(1, N)),
        ]
        == [532480, 74240, 74752, 75264]
    )
    assert cost.prefill_flops == cost.prefill.flops
    # per output token: the 3 decode steps' FLOPs / (3 steps * 2 sequences)
    decode = sum(c.flops.value for c in cost.decode_steps)
    assert cost.decode_flops_per_token.value == decode / (3 * B)
    assert cost.decode_flops_per_token.unit == "FLOPs/token"

    # KV cache read by decode step t: S + t - 1 cached tokens x 2 layers x (K + V) x B x
    # 2 KV heads x head_dim 8 x 4 bytes = 512 B per token: 4096, 4608, 5120 (prefill: 0)
    assert [c.kv_cache_bytes.value for c in cost.calls] == [0, 4096, 4608, 5120]
    assert cost.kv_cache_bytes_per_token.value == (4096 + 4608 + 5120) / (3 * B)
    # weights read per decode step (fp32): per layer q, o 32*32, k, v 32*16, gate, up, down
    # 32*48, two norms 32 = 7744, x 2 layers = 15488; final norm 32; LM head 64*32 = 2048;
    # the embedding table is only looked up: B rows x 32 = 64 elements.
    # (15488 + 32 + 2048 + 64) * 4 = 70528 B per step; the prefill looks up B*S = 16 rows:
    # (15488 + 32 + 2048 + 512) * 4 = 72320 B
    assert [c.weight_bytes.value for c in cost.calls] == [72320, 70528, 70528, 70528]
    assert cost.weight_bytes_per_token.value == 70528 / B
    assert not [d for d in cost.diagnostics if d.severity != "info"]


def test_static_cache_decode_reads_the_whole_buffer(
    llama: nn.Module, prompt: dict[str, torch.Tensor]
) -> None:
    """A static cache holds max_length - 1 = S + N - 1 = 11 slots from the first step on;
    each decode step's attention runs over all 11 (masked), and reads all 11."""
    cost = generation_cost(
        llama, lambda: llama.generate(**prompt, **GENERATE, cache_implementation="static")
    )
    slots = S + N - 1
    assert [c.product_flops.value for c in cost.calls] == [
        llama_call(S, S),
        *(llama_call(1, slots) for _ in range(1, N)),
    ]  # 532480, then 75264 three times
    assert [c.kv_cache_bytes.value for c in cost.calls] == [0] + [512 * slots] * 3  # 5632 B


def test_without_cache_each_step_recomputes_its_prefix(
    llama: nn.Module, prompt: dict[str, torch.Tensor]
) -> None:
    cost = generation_cost(llama, lambda: llama.generate(**prompt, **GENERATE, use_cache=False))
    # step t takes all S + t tokens, and attends over them: llama_call(S + t, S + t)
    assert [c.product_flops.value for c in cost.calls] == [
        llama_call(S + t, S + t) for t in range(N)
    ]
    assert [c.kv_cache_bytes.value for c in cost.calls] == [0, 0, 0, 0]
    codes = [d.code for d in cost.diagnostics]
    assert codes == ["decode_without_cache"]


def test_mixture_of_experts_weight_bytes_are_unavailable(prompt: dict[str, torch.Tensor]) -> None:
    model = build_hf_model(
        "MixtralConfig",
        model_class="AutoModelForCausalLM",
        **GQA,
        num_local_experts=4,
        num_experts_per_tok=2,
    )
    cost = generation_cost(model, lambda: model.generate(**prompt, max_new_tokens=2))
    assert cost.total.is_complete
    assert all(c.weight_bytes.status == "unavailable" for c in cost.calls)
    assert cost.weight_bytes_per_token.status == "unavailable"
    assert "routed_expert_weights" in [d.code for d in cost.diagnostics]
    assert cost.kv_cache_bytes_per_token.value == 4096 / B  # one decode step: 8 cached tokens


def test_bad_input_leaves_no_hook(llama: nn.Module, prompt: dict[str, torch.Tensor]) -> None:
    before = _hook_counts(llama)
    with pytest.raises(TypeError, match=r"model must be an nn\.Module"):
        generation_cost("llama", lambda: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="zero-argument callable"):
        generation_cost(llama, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="never called the model"):
        generation_cost(llama, lambda: torch.ones(2) + 1)

    def broken() -> None:
        llama(**prompt)
        raise RuntimeError("sampler failed")

    with pytest.raises(RuntimeError, match="sampler failed"):
        generation_cost(llama, broken)
    assert _hook_counts(llama) == before


def _hook_counts(model: nn.Module) -> tuple[int, ...]:
    glob = nn.modules.module
    return (
        sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules()),
        len(glob._global_forward_hooks),
        len(glob._global_forward_pre_hooks),
    )


def test_the_pipeline_decoder_config_generates_with_a_complete_count() -> None:
    """conf/model/llama.yaml (the generation figures' model, `model=llama input=hf_tokens`):
    built as the pipeline builds it, generate runs with the cache and counts completely."""
    import yaml

    conf = yaml.safe_load((ROOT / "conf" / "model" / "llama.yaml").read_text(encoding="utf-8"))
    kwargs = {**conf["kwargs"], "seed": 0}  # ${seed}, resolved
    model = build_hf_model(**kwargs)
    tokens = token_inputs(batch_size=1, seq_len=8, vocab_size=kwargs["vocab_size"], seed=0)
    cost = generation_cost(model, lambda: model.generate(**tokens, max_new_tokens=3))
    assert cost.total.is_complete and [c.input_tokens for c in cost.calls] == [8, 1, 1]
    # width 64, 4 heads of 16, 2 KV heads: decode step t reads 8 + t - 1 cached tokens x
    # 2 layers x (K + V) x 2 KV heads x 16 x 4 B = 512 B per token: 4096, 4608
    assert [c.kv_cache_bytes.value for c in cost.decode_steps] == [4096, 4608]


def test_encoder_decoder_calls_are_decoder_steps(prompt: dict[str, torch.Tensor]) -> None:
    """T5: the encoder runs once before the first forward call (outside_flops); each call is
    one decoder token and reads both its self-attention and its cross-attention cache."""
    model = build_hf_model(
        "T5Config",
        model_class="AutoModelForSeq2SeqLM",
        **{"vocab_size": V, "d_model": D, "d_kv": 8, "d_ff": FF, "num_layers": LAYERS},
        **{"num_decoder_layers": LAYERS, "num_heads": 4, "pad_token_id": 0, "eos_token_id": 1},
    )
    cost = generation_cost(
        model, lambda: model.generate(**prompt, **GENERATE, decoder_start_token_id=0)
    )
    assert cost.total.is_complete and [c.input_tokens for c in cost.calls] == [1, 1, 1, 1]
    # per cached token: 2 layers x (K + V) x B x 4 heads x 8 x 4 B = 1024 B. Step t reads t
    # decoder tokens and the S = 8 encoder tokens of the cross-attention: (t + 8) x 1024
    assert [c.kv_cache_bytes.value for c in cost.calls] == [0, 9216, 10240, 11264]
    assert "encoder_outside_forward_calls" in [d.code for d in cost.diagnostics]


def test_the_cache_read_agrees_with_the_kv_plan_layout(
    llama: nn.Module, prompt: dict[str, torch.Tensor]
) -> None:
    """What a decode step read from the real cache, per sequence, is what kv_cache_plan's
    layout (read off the config alone) says a sequence of that context holds."""
    from torchscan_stages import kv_cache_plan

    cost = generation_cost(llama, lambda: llama.generate(**prompt, **GENERATE))
    for step in cost.decode_steps:
        context = S + step.index - 1  # the tokens cached before step t
        plan = kv_cache_plan(llama, 2**20, context, torch.float32)
        # 2 layers x 2 KV heads x (8 + 8) x 4 B = 256 B per token and sequence
        assert plan.kv_bytes_per_sequence.value == 256 * context
        assert step.kv_cache_bytes.value == B * plan.kv_bytes_per_sequence.value


def test_a_hybrid_reads_its_attention_cache_and_its_mamba_state(
    prompt: dict[str, torch.Tensor],
) -> None:
    """Jamba, Mamba layers 0 and 2 beside attention layers 1 and 3: the KV cache of the two
    attention layers, and the Mamba layers' conv and SSM states apart from it."""
    model = build_hf_model(
        "JambaConfig",
        model_class="AutoModelForCausalLM",
        **GQA | {"num_hidden_layers": 4, "attn_layer_period": 2, "attn_layer_offset": 1},
        **{"num_experts": 1, "mamba_d_state": 4, "mamba_expand": 2},
    )
    cost = generation_cost(model, lambda: model.generate(**prompt, max_new_tokens=3))
    assert cost.total.is_complete
    # KV: 2 attention layers x (K + V) x B x 2 KV heads x 8 x 4 B = 512 B per cached token
    assert [c.kv_cache_bytes.value for c in cost.calls] == [0, 512 * S, 512 * (S + 1)]
    # state per Mamba layer: conv (B, 2 x 32 inner, 4 taps) + SSM (B, 64, 4 states) in fp32:
    # 2 x (2 x 64 x 4 x 4 B) = 4096; 2 layers 8192, the same at every step
    assert [c.recurrent_state_bytes.value for c in cost.calls] == [0, 8192, 8192]
