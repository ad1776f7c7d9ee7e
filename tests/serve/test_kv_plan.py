"""kv_cache_plan: the closed form from each model's own attention layout, confirmed by
predicting a decode step at the planned batch (fits) and one more (does not).

Per token and layer a cache keeps ``kv_heads * (head_dim + v_head_dim)`` elements (GQA), for
at most ``window`` tokens on a sliding layer; a latent (MLA) layer keeps
``kv_lora_rank + qk_rope_head_dim``; shared and recurrent layers keep none. All in bf16 (2 B).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers", reason="the [hf] extra (transformers) is not installed")

import transformers

from torchscan_stages.integrations.hf_models import build_hf_model
from torchscan_stages.predict import predict_peak_memory
from torchscan_stages.serve.kv_layout import read_layout
from torchscan_stages.serve.kv_plan import kv_cache_plan

KIB = 1024
SMALL = {
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "hidden_size": 32,
    "intermediate_size": 48,
    "vocab_size": 64,
    "max_position_embeddings": 4096,
}
# Qwen3-Next: 3 linear-attention (gated delta net) layers, then 1 attention layer; small
# linear-attention and expert sizes so the weights are small too
QWEN3_NEXT = SMALL | {
    "head_dim": 8,
    "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    "linear_num_value_heads": 2,
    "linear_num_key_heads": 2,
    "linear_key_head_dim": 8,
    "linear_value_head_dim": 8,
    "num_experts": 2,
    "num_experts_per_tok": 1,
    "moe_intermediate_size": 16,
    "shared_expert_intermediate_size": 16,
}
LLAMA = SMALL | {"num_hidden_layers": 2, "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 0}


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    return build_hf_model("LlamaConfig", model_class="AutoModelForCausalLM", **LLAMA)


def test_llama_plan_equals_the_closed_form_and_the_prediction_confirms_it(llama) -> None:
    # per token: 2 layers x 2 KV heads x (8 + 8) x 2 B = 128 B; 1024 tokens: 131072 B
    per_sequence = 2 * 2 * (8 + 8) * 2 * 1024
    # weights: per layer q, o 32*32, k, v 32*16, gate, up, down 32*48, 2 norms 32 = 7744;
    # 2 layers 15488 + final norm 32 + LM head 2048 + embedding 2048 = 19616 params x 2 B
    weights = 19616 * 2
    assert (per_sequence, weights) == (131072, 39232)
    reserve = 64 * KIB
    capacity = weights + 5 * per_sequence + reserve + 1000  # 760128 + 1000
    plan = kv_cache_plan(llama, capacity, 1024, torch.bfloat16, batch_size=2, reserve_bytes=reserve)
    assert plan.weight_bytes.value == weights
    assert plan.kv_bytes_per_sequence.value == per_sequence
    # (capacity - weights - reserve) // per_sequence = (655360 + 1000) // 131072 = 5
    assert plan.max_sequences.value == 5
    # 2 sequences: (655360 + 1000) // (2 * 128 B per token) = 2563 tokens
    assert plan.max_context.value == (5 * per_sequence + 1000) // (2 * 128) == 2563
    # the predicted decode step (CUDA allocator, 512 B blocks): weights 39232 -> 39424,
    # B caches of 2 layers x K, V (B x 2 x 1024 x 8 x 2 B, whole blocks) = B x 131072,
    # and at the peak the float32 logits and their softmax, B x 64 x 4 B rounded up each:
    #   B = 5: 39424 + 655360 + 2 * 1536 = 697856 <= capacity 761128: fits
    #   B = 6: 39424 + 786432 + 2 * 1536 = 828928 > capacity: does not
    assert [(c.batch, c.predicted_peak.value, c.fits) for c in plan.checks] == [
        (5, 697856, True),
        (6, 828928, False),
    ]
    assert plan.confirmed is True
    assert not plan.diagnostics


def test_too_small_a_reserve_is_not_confirmed(llama) -> None:
    """No reserve and 2000 B of slack: the planned 5 sequences' step needs 3072 B of logits
    and 192 B of weight rounding on top, so the prediction disagrees and says so."""
    weights, per_sequence = 39232, 131072
    plan = kv_cache_plan(llama, weights + 5 * per_sequence + 2000, 1024, torch.bfloat16)
    assert plan.max_sequences.value == 5
    assert [c.fits for c in plan.checks] == [False, False]
    assert plan.confirmed is False
    # (one sequence could hold all 4096 positions: the context is the model's limit)
    assert [d.code for d in plan.diagnostics] == [
        "context_limited_by_model",
        "kv_plan_not_confirmed",
    ]


def test_layouts_from_configs() -> None:
    """Sliding windows, hybrid sliding/full, latent (MLA), KV-shared and recurrent layers."""
    mistral = read_layout(transformers.MistralConfig(**SMALL, sliding_window=256), "mistral")
    # every layer sliding: 4 layers x 2 x 16 elements x min(256, context)
    assert mistral.elements_per_sequence(1024) == 4 * 32 * 256 == 32768
    assert mistral.elements_per_sequence(100) == 4 * 32 * 100
    gemma3 = transformers.Gemma3TextConfig(
        **SMALL,
        head_dim=8,
        sliding_window=256,
        layer_types=["sliding_attention"] * 3 + ["full_attention"],
    )
    # 3 sliding layers x 32 x 256 + 1 full layer x 32 x 1024 = 24576 + 32768
    assert read_layout(gemma3, "gemma3").elements_per_sequence(1024) == 57344
    gemma3n = transformers.Gemma3nTextConfig(
        **SMALL | {"intermediate_size": [48] * 4},
        head_dim=8, sliding_window=256, num_kv_shared_layers=2,
        layer_types=["sliding_attention", "full_attention"] * 2,
        activation_sparsity_pattern=[0.0] * 4,
    )  # fmt: skip
    shared = read_layout(gemma3n, "gemma3n")
    # layers 2 and 3 read layers 0 and 1's caches: 32 x 256 + 32 x 1024
    assert [layer.kind for layer in shared.layers] == ["sliding", "full", "shared", "shared"]
    assert shared.elements_per_sequence(1024) == 32 * 256 + 32 * 1024 == 40960
    qwen3_next = transformers.Qwen3NextConfig(**QWEN3_NEXT)
    hybrid = read_layout(qwen3_next, "qwen3-next")
    assert hybrid.recurrent_layers == [0, 1, 2]
    assert hybrid.elements_per_sequence(1024) == 32 * 1024  # one attention layer
    neox = read_layout(transformers.GPTNeoXConfig(**SMALL | {"num_key_value_heads": 4}), "neox")
    assert neox.kv_heads == 4 and neox.elements_per_sequence(10) == 4 * 4 * 16 * 10  # MHA
    # Falcon-H1: attention beside a Mamba state in every layer: its KV cache counts, and the
    # state must be sized (2 layers x 2 KV heads x (8 + 8) x 10 tokens)
    falcon_h1 = read_layout(
        transformers.FalconH1Config(
            **SMALL | {"num_hidden_layers": 2}, mamba_d_ssm=32, mamba_n_heads=4
        ),
        "falcon-h1",
    )
    assert [layer.kind for layer in falcon_h1.layers] == ["hybrid", "hybrid"]
    assert falcon_h1.recurrent_layers == [0, 1]
    assert falcon_h1.elements_per_sequence(10) == 2 * 2 * 16 * 10
    # a layer type whose cache is not this layout (sparse / compressed attention): refused
    unknown = SimpleNamespace(**SMALL, layer_types=["full_attention", "indexed_attention"] * 2)
    with pytest.raises(ValueError, match=r"layer_types\[1\]='indexed_attention' is a layer"):
        read_layout(unknown, "unknown")
    # multi-query: one KV head (Falcon-7B's default; GPTBigCode); Falcon's new architecture
    # keeps num_kv_heads
    assert read_layout(transformers.FalconConfig(), "falcon").kv_heads == 1
    falcon_new = transformers.FalconConfig(new_decoder_architecture=True, num_kv_heads=8)
    assert read_layout(falcon_new, "falcon").kv_heads == 8


DEEPSEEK = {
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "hidden_size": 32,
    "intermediate_size": 48,
    "moe_intermediate_size": 16,
    "vocab_size": 64,
    "max_position_embeddings": 4096,
    "kv_lora_rank": 16,
    "q_lora_rank": None,
    "qk_rope_head_dim": 4,
    "qk_nope_head_dim": 8,
    "v_head_dim": 8,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "first_k_dense_replace": 1,
    "n_group": 1,
    "topk_group": 1,
}


def test_latent_cache_plan_from_a_config() -> None:
    """DeepSeek-V3-style MLA: the latent (16) and the rope key (4) per token and layer, not
    the 4 heads x (12 + 8) a decompressed cache would hold."""
    config = transformers.DeepseekV3Config(**DEEPSEEK)
    model = build_hf_model("DeepseekV3Config", model_class="AutoModelForCausalLM", **DEEPSEEK)
    weights = 2 * sum(p.numel() for p in model.parameters())  # the meta build's count
    per_sequence = 2 * (16 + 4) * 2 * 1024  # 2 layers x 20 x 2 B x 1024 = 81920
    capacity = 10 * 2**20
    plan = kv_cache_plan(config, capacity, 1024, torch.bfloat16, reserve_bytes=64 * KIB)
    assert plan.weight_bytes.value == weights
    assert plan.kv_bytes_per_sequence.value == per_sequence == 81920
    assert plan.max_sequences.value == (capacity - weights - 64 * KIB) // per_sequence
    assert plan.max_context.value == 4096  # one sequence: limited by the position limit
    assert [d.code for d in plan.diagnostics] == ["context_limited_by_model"]
    assert plan.confirmed is True


def test_recurrent_layers_need_their_state() -> None:
    config = transformers.Qwen3NextConfig(**QWEN3_NEXT)
    plan = kv_cache_plan(config, 2**20, 1024, torch.bfloat16)
    assert plan.max_sequences.status == "unavailable" and plan.checks == ()
    assert [d.code for d in plan.diagnostics] == ["recurrent_state_unsized"]
    weights = plan.weight_bytes.value
    sized = kv_cache_plan(
        config, 2**20, 1024, torch.bfloat16, state_bytes_per_sequence=4096, reserve_bytes=64 * KIB
    )
    # one attention layer: 2 x 16 x 2 B x 1024 = 65536 B + 4096 B of state per sequence
    assert sized.max_sequences.value == (2**20 - weights - 64 * KIB) // (65536 + 4096)
    assert sized.confirmed is True


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"capacity_bytes": 0}, "capacity_bytes must be an int >= 1, got 0"),
        ({"capacity_bytes": 1.5e9}, "capacity_bytes must be an int >= 1, got 1500000000.0"),
        ({"context_len": -1}, "context_len must be an int >= 1, got -1"),
        ({"dtype": "bf16"}, "dtype must be a torch floating dtype"),
        ({"dtype": torch.bool}, "dtype must be a torch floating dtype"),
        ({"batch_size": 0}, "batch_size must be an int >= 1"),
        ({"device": "tpu"}, "device='tpu' is not a valid device string; predictions take 'cuda'"),
    ],
)
def test_bad_arguments_are_one_line(llama, arguments: dict, message: str) -> None:
    call = {"capacity_bytes": 2**20, "context_len": 128, "dtype": torch.bfloat16} | arguments
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        kv_cache_plan(llama, **call)


def test_a_model_without_attention_config_is_refused() -> None:
    with pytest.raises(ValueError, match=r"the model \(Linear\) has no attention config"):
        kv_cache_plan(torch.nn.Linear(4, 4), 2**20, 128)
    with pytest.raises(ValueError, match=r"the config \(dict\) has no attention config"):
        kv_cache_plan({"num_hidden_layers": 2}, 2**20, 128)
    with pytest.raises(ValueError, match=r"the config \(T5Config\) is an encoder-decoder"):
        kv_cache_plan(transformers.T5Config(), 2**20, 128)


def test_the_models_own_decode_step_agrees_with_the_plan() -> None:
    """The plan's check runs a hand-written step; the model's own decode step (transformers'
    StaticCache at the planned batch and context, bf16 weights) is predicted to fit and one
    more sequence not, in the same capacity: its activations (projections, MLP, masks,
    logits) stay inside the 64 KiB reserve."""
    model = build_hf_model("LlamaConfig", model_class="AutoModelForCausalLM", **LLAMA)
    model = model.to(torch.bfloat16)
    weights, per_sequence, reserve = 39232, 131072, 64 * KIB
    capacity = weights + 5 * per_sequence + reserve + 1000
    plan = kv_cache_plan(model, capacity, 1024, torch.bfloat16, reserve_bytes=reserve)
    assert plan.max_sequences.value == 5 and plan.confirmed

    def decode(batch: int):
        def step() -> None:
            cache = transformers.StaticCache(config=model.config, max_cache_len=1024)
            with torch.no_grad():
                model(
                    input_ids=torch.zeros(batch, 1, dtype=torch.long),
                    past_key_values=cache,
                    cache_position=torch.tensor([1023]),
                )

        return step

    # resident, in 512 B blocks: per layer q 2048, k 1024, v 1024, o 2048, gate/up/down 3072
    # each, two norms of 64 B -> 512 each = 16384; x 2 layers + final norm 512 + embedding and
    # LM head 4096 each = 41472; the rotary buffers inv_freq and original_inv_freq 512 each
    resident = 2 * 16384 + 512 + 2 * 4096 + 2 * 512
    for batch, fits in ((5, True), (6, False)):
        report = predict_peak_memory(decode(batch), device="cuda", capacity_bytes=capacity)
        assert report.resident_bytes is not None and report.resident_bytes.value == resident
        cache = batch * per_sequence  # the StaticCache: 2 layers x K, V of B x 2 x 1024 x 8 bf16
        assert cache <= report.peak.value <= cache + reserve  # the activations fit the reserve
        assert report.fits is fits  # resident + peak against the capacity
