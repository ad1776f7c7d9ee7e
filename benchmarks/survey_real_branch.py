"""Hugging Face families with tokenizer-style inputs: predicted against the measured peak.

Run: ``.venv/bin/python benchmarks/survey_real_branch.py [--seq 128]``. Each family is built
from config (width 64, 8 query / 2 KV heads, 1-2 layers, batch 2, no download), called with
``input_ids`` and an all-ones ``attention_mask`` (the package's ``token_inputs``), once as a
no-grad forward and once as an AdamW training step built outside the step;
``predict_peak_memory(device="cpu")`` is compared with ``measure_peak_memory`` of the same
callable (the first step against one real step). The rows of docs/prediction.md's table
"what a user writes -> what the prediction does" marked "survey only" come from here (run on
this tree and on main for "before"). A ``complete`` figure off by more than 5 % is a defect.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from torchscan_stages import predict_peak_memory  # noqa: E402
from torchscan_stages.integrations.hf_models import build_hf_model, token_inputs  # noqa: E402
from torchscan_stages.measure.memory import measure_peak_memory  # noqa: E402

DECODER = {
    "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8,
    "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256,
    "max_position_embeddings": 1024, "pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0,
}  # fmt: skip
DECODERS = {
    "llama": ("LlamaConfig", DECODER), "glm4": ("Glm4Config", DECODER),
    "mistral": ("MistralConfig", DECODER), "phi3": ("Phi3Config", DECODER),
    "olmo2": ("Olmo2Config", DECODER), "starcoder2": ("Starcoder2Config", DECODER),
    "gemma": ("GemmaConfig", {**DECODER, "head_dim": 8}),
    "qwen3": ("Qwen3Config", {**DECODER, "head_dim": 8}),
    "granite": ("GraniteConfig", DECODER), "stablelm": ("StableLmConfig", DECODER),
}  # fmt: skip
SEQ2SEQ = {
    "d_model": 64, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
    "vocab_size": 256, "pad_token_id": 0, "eos_token_id": 2, "decoder_start_token_id": 2,
    "bos_token_id": 1,
}  # fmt: skip


def _seq2seq(seq: int) -> dict[str, tuple[torch.nn.Module, dict[str, torch.Tensor]]]:
    inputs = token_inputs(batch_size=2, seq_len=seq, vocab_size=256)
    inputs["decoder_input_ids"] = inputs["input_ids"][:, : seq // 4]
    umt5 = {"d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 1, "num_decoder_layers": 1,
            "num_heads": 4, "vocab_size": 256, "pad_token_id": 0, "eos_token_id": 1,
            "decoder_start_token_id": 0}  # fmt: skip
    return {
        "umt5": (build_hf_model("UMT5Config", model_class="UMT5ForConditionalGeneration",
                                attn_implementation="sdpa", **umt5), inputs),
        "m2m100": (build_hf_model("M2M100Config", model_class="M2M100ForConditionalGeneration",
                                  attn_implementation="sdpa", max_position_embeddings=1024,
                                  **SEQ2SEQ), inputs),
    }  # fmt: skip


def _ratio(workload: Callable[[], Any]) -> str:
    report = predict_peak_memory(workload, device="cpu")
    measured = measure_peak_memory(workload).memory.results[0].value  # type: ignore[union-attr]
    value = report.peak.value if report.peak.value is not None else report.peak.known_value
    codes = sorted({d.code for d in report.diagnostics if d.severity != "info"})
    return f"{report.peak.status} {value / measured:.4f}x {','.join(codes) or '-'}"


def _rows(name: str, model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> str:
    optimizer = torch.optim.AdamW(model.parameters())

    def forward() -> None:
        with torch.no_grad():
            model(**inputs)

    def step() -> None:
        model(**inputs).logits.float().pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    model.eval()
    inference = _ratio(forward)
    model.train()
    return f"| {name} | {inference} | {_ratio(step)} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=128, help="tokens per sequence")
    options = parser.parse_args()
    print("| family | no-grad forward | training step |\n| --- | --- | --- |")
    inputs = token_inputs(batch_size=2, seq_len=options.seq, vocab_size=256)
    for name, (config, fields) in DECODERS.items():
        model = build_hf_model(config, model_class="AutoModelForCausalLM",
                               attn_implementation="sdpa", **fields)  # fmt: skip
        print(_rows(name, model, inputs), flush=True)
    for name, (model, seq2seq_inputs) in _seq2seq(options.seq).items():
        print(_rows(name, model, seq2seq_inputs), flush=True)


if __name__ == "__main__":
    main()
