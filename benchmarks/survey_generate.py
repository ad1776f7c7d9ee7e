"""Is ``generate`` counted completely on the decoder families people serve? A survey, not a test.

Run: ``python benchmarks/survey_generate.py [--doc docs/serving.md] [NAME ...]``. Builds
each causal LM from its transformers config class with small dimensions, random weights and
no download (sdpa attention, eager where the family has no sdpa path), runs greedy
``generate`` (batch 2, 8 prompt tokens, 4 new tokens) under ``measure_flops`` and under
``generation_cost``, and reports the status of the total and of its tensor-product share,
whether the split's total is the same count, and the status of every call's KV-cache and
weight bytes; then the total's status with sampling (top-k, top-p, temperature, repetition
penalty) and with a static cache. A family whose tiny config does not build prints ERROR
with the reason.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import Any

from doc_sections import write_section

from torchscan_stages import generation_cost, measure_flops
from torchscan_stages.integrations.hf_models import build_hf_model, token_inputs

TOKENS = {"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 0}
DECODER = {
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "hidden_size": 32,
    "intermediate_size": 48,
    "vocab_size": 64,
    "max_position_embeddings": 64,
    **TOKENS,
}
GPT_NAMES = {"n_layer": 2, "n_head": 4, "vocab_size": 64, **TOKENS}
FAMILIES: dict[str, dict[str, Any]] = {
    "LlamaConfig": DECODER,
    "MistralConfig": DECODER | {"sliding_window": 4},
    "Qwen2Config": DECODER,
    "Qwen3Config": DECODER | {"head_dim": 8},
    "Gemma2Config": DECODER | {"head_dim": 8, "sliding_window": 4},
    "Gemma3TextConfig": DECODER | {"head_dim": 8, "sliding_window": 4},
    "PhiConfig": DECODER,
    "Phi3Config": DECODER,
    "OlmoConfig": DECODER,
    "StableLmConfig": DECODER,
    "CohereConfig": DECODER,
    "GraniteConfig": DECODER,
    "MixtralConfig": DECODER | {"num_local_experts": 4, "num_experts_per_tok": 2},
    "DeepseekV3Config": DECODER
    | {
        "num_key_value_heads": 4,
        "moe_intermediate_size": 16,
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
    },
    # hybrids: linear attention (gated delta rule) or Mamba beside attention
    "Qwen3NextConfig": DECODER
    | {"num_hidden_layers": 4, "head_dim": 8}
    | {"layer_types": ["linear_attention"] * 3 + ["full_attention"]}
    | {"linear_num_value_heads": 2, "linear_num_key_heads": 2, "linear_key_head_dim": 8}
    | {"linear_value_head_dim": 8, "num_experts": 2, "num_experts_per_tok": 1}
    | {"moe_intermediate_size": 16, "shared_expert_intermediate_size": 16},
    "JambaConfig": DECODER
    | {"num_hidden_layers": 4, "attn_layer_period": 2, "attn_layer_offset": 1}
    | {"num_experts": 1, "mamba_d_state": 4, "mamba_expand": 2},
    "FalconH1Config": DECODER
    | {"mamba_d_ssm": 32, "mamba_n_heads": 4, "mamba_d_head": 8, "mamba_n_groups": 1}
    | {"mamba_d_state": 8},
    "GPTNeoXConfig": {k: v for k, v in DECODER.items() if k != "num_key_value_heads"},
    "FalconConfig": {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 32}
    | {"vocab_size": 64, **TOKENS},
    "OPTConfig": {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 32}
    | {"ffn_dim": 48, "vocab_size": 64, "max_position_embeddings": 64, **TOKENS}
    | {"word_embed_proj_dim": 32},
    "BloomConfig": {"n_layer": 2, "n_head": 4, "hidden_size": 32, "vocab_size": 64, **TOKENS},
    "GPT2Config": GPT_NAMES | {"n_embd": 32, "n_positions": 64},
    "GPTJConfig": GPT_NAMES | {"n_embd": 32, "n_positions": 64, "rotary_dim": 4},
    "GPTBigCodeConfig": GPT_NAMES | {"n_embd": 32, "n_positions": 64},
}


# other generate settings: sampling with every common logits processor, a static cache
VARIANTS = {
    "sampling": {"do_sample": True, "top_k": 10, "top_p": 0.9, "temperature": 0.7}
    | {"repetition_penalty": 1.2},
    "static cache": {"do_sample": False, "cache_implementation": "static"},
}


def _build(name: str) -> tuple[Any, str]:
    failure: Exception | None = None
    for attention in ("sdpa", "eager"):
        try:
            kwargs = FAMILIES[name]
            model = build_hf_model(
                name, model_class="AutoModelForCausalLM", attn_implementation=attention, **kwargs
            )
            return model, attention
        except Exception as error:  # the next attention, then ERROR
            failure = error
    raise RuntimeError(" ".join(str(failure).split())[:160])


def survey(name: str) -> str:
    """One markdown row: statuses of the count, the split and the bytes each call read."""
    try:
        model, attention = _build(name)
    except RuntimeError as error:
        return f"| {name} | ERROR: {error} | | | | |"
    prompt = token_inputs(batch_size=2, seq_len=8, vocab_size=64, seed=1)

    def generate() -> Any:
        return model.generate(**prompt, max_new_tokens=4, do_sample=False)

    report = measure_flops(generate)
    cost = generation_cost(model, generate)
    product = report.product_flops.status if report.product_flops is not None else "-"
    same = "yes" if cost.total == report.total else "NO"
    kv = sorted({call.kv_cache_bytes.status for call in cost.calls})
    weights = sorted({call.weight_bytes.status for call in cost.calls})
    variants = [_variant(model, prompt, settings) for settings in VARIANTS.values()]
    return (
        f"| {name} ({attention}) | {report.total.status} | {product} | {same} | "
        f"{'/'.join(kv)} | {'/'.join(weights)} | {' | '.join(variants)} |"
    )


def _variant(model: Any, prompt: dict[str, Any], settings: dict[str, Any]) -> str:
    """The total's status under other generate settings, or the error that stopped it."""
    try:
        report = measure_flops(lambda: model.generate(**prompt, max_new_tokens=4, **settings))
    except Exception as error:  # a setting the family does not support: say which
        return f"ERROR: {type(error).__name__}"
    return report.total.status


# generate's other modes, on Llama: every logits processor, stopping rule and search
MODES: dict[str, dict[str, Any]] = {
    "beam search (4 beams)": {"num_beams": 4, "do_sample": False},
    "beam sampling": {"num_beams": 2, "do_sample": True},
    "3 returned sequences": {"do_sample": True, "num_return_sequences": 3},
    "min_p": {"do_sample": True, "min_p": 0.1},
    "typical_p": {"do_sample": True, "typical_p": 0.9},
    "epsilon cutoff": {"do_sample": True, "epsilon_cutoff": 3e-4},
    "eta cutoff": {"do_sample": True, "eta_cutoff": 3e-4},
    "no_repeat_ngram_size": {"no_repeat_ngram_size": 2},
    "bad_words_ids": {"bad_words_ids": [[5], [6, 7]]},
    "sequence_bias": {"sequence_bias": {(5,): -1.0}},
    "forced_eos_token_id": {"forced_eos_token_id": 1},
    "exponential decay length penalty": {"exponential_decay_length_penalty": (2, 1.5)},
    "scores and logits returned": {"output_scores": True, "output_logits": True}
    | {"return_dict_in_generate": True},
    "suppress tokens": {"suppress_tokens": [3, 4], "begin_suppress_tokens": [5]},
    "prompt lookup (batch 1)": {"prompt_lookup_num_tokens": 3},
}


def survey_modes() -> list[str]:
    """One row per generate mode on Llama: the total's status (or the error)."""
    model, _ = _build("LlamaConfig")
    rows = []
    for mode, settings in MODES.items():
        batch = 1 if "batch 1" in mode else 2
        prompt = token_inputs(batch_size=batch, seq_len=8, vocab_size=64, seed=1)
        rows.append(f"| {mode} | {_variant(model, prompt, settings)} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", default=list(FAMILIES))
    parser.add_argument("--doc", type=Path, default=None)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    rows = [survey(name) for name in args.names]
    modes = survey_modes()
    text = (
        "#### Survey: `generate` counted on decoder families\n\n"
        f"Run: {time.strftime('%Y-%m-%dT%H:%M:%S+00:00', time.gmtime())} by `python "
        "benchmarks/survey_generate.py` (batch 2, 8 prompt tokens, 4 new tokens; greedy "
        "unless the column says).\n\n"
        "| family (attention) | total | products | split total = count | KV-cache bytes "
        "| weight bytes | total, sampling | total, static cache |\n"
        "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        "Llama under generate's other modes (the total's status):\n\n"
        "| mode | total |\n|---|---|\n" + "\n".join(modes) + "\n\n"
    )
    print(text, end="")
    if args.doc is not None:
        write_section(args.doc, "survey_generate", text)


if __name__ == "__main__":
    main()
