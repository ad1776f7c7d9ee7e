"""Token latencies of the HF token-stream handler against its steps timed apart.

A small Llama built from config (random weights, no download), greedy decoding with the KV
cache. Interleaved in each round, one thread:

* **prefill alone**: ``hf_stream.prefill`` on the prompt (the forward and the first token);
* **decode step alone**: after an untimed prefill and untimed steps up to the middle of the
  generation, one ``hf_stream.decode_step`` timed ``--steps`` times at that context (the
  cache cropped back by one token after each);
* **the stream**: ``token_stream_handler(model, max_new_tokens=N)(prompt)``, timed per
  ``next()``: TTFT is the time to the first token, TPOT the mean time per later token.

The claim: TTFT within 20% of the prefill alone and TPOT within 20% of the
decode step alone (medians over rounds). What it shows: the handler adds no work of its
own per token, so a served TTFT/TPOT measured through it is the model's prefill and decode.

    .venv/bin/python benchmarks/bench_generation.py [--rounds 15] [--prompt 128] [--new 32]
        [--doc docs/serving.md]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from doc_sections import write_section

from torchscan_stages.integrations.hf_models import build_hf_model, token_inputs
from torchscan_stages.serve.hf_stream import decode_step, prefill, token_stream_handler

CONFIG = {
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "hidden_size": 256,
    "intermediate_size": 688,
    "vocab_size": 8000,
    "max_position_embeddings": 1024,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "pad_token_id": 0,
}
clock = time.perf_counter


def time_prefill(model: Any, prompt: torch.Tensor) -> float:
    start = clock()
    prefill(model, prompt)
    return clock() - start


def time_decode(model: Any, prompt: torch.Tensor, new: int, steps: int) -> float:
    """Median of ``steps`` decode steps at the middle context of the generation."""
    token, cache = prefill(model, prompt)
    for _ in range(new // 2):
        token = decode_step(model, token, cache)
    times = []
    for _ in range(steps):
        start = clock()
        decode_step(model, token, cache)
        times.append(clock() - start)
        cache.crop(-1)  # back to the same context for the next repeat
    return statistics.median(times)


def time_stream(model: Any, prompt: torch.Tensor, new: int) -> tuple[float, float]:
    """(TTFT, mean TPOT) of one stream, read per ``next()``."""
    stream = token_stream_handler(model, max_new_tokens=new)(prompt)
    start = clock()
    stamps = []
    for _ in stream:
        stamps.append(clock())
    if len(stamps) != new:
        raise RuntimeError(f"the stream gave {len(stamps)} tokens, expected {new}")
    return stamps[0] - start, (stamps[-1] - stamps[0]) / (new - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--new", type=int, default=32)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--doc", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = build_hf_model("LlamaConfig", model_class="AutoModelForCausalLM", **CONFIG)
    prompt = token_inputs(batch_size=1, seq_len=args.prompt, vocab_size=CONFIG["vocab_size"])
    ids = prompt["input_ids"][0]
    time_stream(model, ids, args.new)  # warm-up: allocator, first-call paths
    sides: dict[str, list[float]] = {"prefill": [], "decode": [], "ttft": [], "tpot": []}
    for _ in range(args.rounds):
        sides["prefill"].append(time_prefill(model, ids))
        sides["decode"].append(time_decode(model, ids, args.new, args.steps))
        ttft, tpot = time_stream(model, ids, args.new)
        sides["ttft"].append(ttft)
        sides["tpot"].append(tpot)
    med = {name: statistics.median(values) for name, values in sides.items()}
    ttft_ratio, tpot_ratio = med["ttft"] / med["prefill"], med["tpot"] / med["decode"]
    verdict = "holds" if max(abs(ttft_ratio - 1), abs(tpot_ratio - 1)) <= 0.2 else "FAILS"
    text = (
        "#### Token latencies of the stream handler against its steps timed apart\n\n"
        f"Run: {time.strftime('%Y-%m-%dT%H:%M:%S+00:00', time.gmtime())} by `python "
        f"benchmarks/bench_generation.py --rounds {args.rounds} --prompt {args.prompt} --new "
        f"{args.new}` (Llama from config: 4 layers, width 256, 8 heads / 4 KV heads, "
        f"vocabulary 8000; fp32, 1 thread; medians over {args.rounds} interleaved rounds): "
        f"TTFT {med['ttft'] * 1e3:.2f} ms against the prefill alone "
        f"{med['prefill'] * 1e3:.2f} ms (**{ttft_ratio:.3f}x**); TPOT "
        f"{med['tpot'] * 1e3:.2f} ms against the decode step alone "
        f"{med['decode'] * 1e3:.2f} ms (**{tpot_ratio:.3f}x**). The 20% claim {verdict}.\n\n"
    )
    print(text, end="")
    if args.doc is not None:
        write_section(args.doc, "bench_generation", text)


if __name__ == "__main__":
    main()
