"""Token latencies of the HF token-stream handler against its steps timed apart.

A small Llama built from config (random weights, no download), greedy decoding with the KV
cache. Interleaved in each round, one thread:

* **prefill alone**: ``hf_stream.prefill`` on the prompt (the forward and the first token),
  the median of ``--steps`` calls;
* **decode step alone**: after an untimed prefill and untimed steps up to the middle of the
  generation, one ``hf_stream.decode_step`` timed ``--steps`` times at that context (the
  cache cropped back by one token after each);
* **the stream**: ``token_stream_handler(model, max_new_tokens=N)(prompt)``, timed per
  ``next()``: TTFT is the time to the first token, TPOT the mean time per later token;
* **served**: ``measure_served`` (LoadGen ``single_stream``, ``--served-queries`` requests
  at least) driving the same handler, as the serve stage does under ``serve=generate``:
  the run's TTFT p50 and TPOT p50 (LoadGen's token latencies, per request).

The claim: TTFT within 20% of the prefill alone and TPOT within 20% of the
decode step alone (medians over rounds), for the stream read directly and for the served
figures. What it shows: neither the handler nor the serving harness adds work of its own
per token, so a served TTFT/TPOT is the model's prefill and decode.

    .venv/bin/python benchmarks/bench_generation.py [--rounds 15] [--prompt 128] [--new 32]
        [--served-queries 8] [--doc docs/serving.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from doc_sections import write_section

from torchscan_stages.integrations.hf_models import build_hf_model, token_inputs
from torchscan_stages.serve.hf_stream import decode_step, prefill, token_stream_handler
from torchscan_stages.serve.measure import measure_served

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


def time_prefill(model: Any, prompt: torch.Tensor, repeats: int) -> float:
    """Median of ``repeats`` prefills (the first after another side's work pays for it)."""
    times = []
    for _ in range(repeats):
        start = clock()
        result = prefill(model, prompt)
        times.append(clock() - start)
        del result  # the cache freed outside the timing
    return statistics.median(times)


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


def time_served(model: Any, prompt: torch.Tensor, new: int, queries: int) -> tuple[float, float]:
    """(TTFT p50, TPOT p50) of one LoadGen single_stream run of the stream handler."""
    handler = token_stream_handler(model, max_new_tokens=new)
    options = {"duration_s": 0.01, "min_queries": queries, "max_duration_s": 600.0}
    report = measure_served(handler, [prompt], scenario="single_stream", options=options)
    tokens = report.tokens
    if tokens is None or not (tokens.ttft.p50.is_complete and tokens.tpot.p50.is_complete):
        codes = ", ".join(f"{d.code}: {d.message[:120]}" for d in report.diagnostics)
        raise RuntimeError(f"no complete TTFT/TPOT p50 from {report.requests} requests ({codes})")
    return float(tokens.ttft.p50.value or 0.0), float(tokens.tpot.p50.value or 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--new", type=int, default=32)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--served-queries", type=int, default=8)  # p50 complete from 6
    parser.add_argument("--doc", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = build_hf_model("LlamaConfig", model_class="AutoModelForCausalLM", **CONFIG)
    prompt = token_inputs(batch_size=1, seq_len=args.prompt, vocab_size=CONFIG["vocab_size"])
    ids = prompt["input_ids"][0]
    time_stream(model, ids, args.new)  # warm-up: allocator, first-call paths
    names = ("prefill", "decode", "ttft", "tpot", "served_ttft", "served_tpot")
    sides: dict[str, list[float]] = {name: [] for name in names}
    load = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        sides["prefill"].append(time_prefill(model, ids, args.steps))
        sides["decode"].append(time_decode(model, ids, args.new, args.steps))
        ttft, tpot = time_stream(model, ids, args.new)
        sides["ttft"].append(ttft)
        sides["tpot"].append(tpot)
        ttft, tpot = time_served(model, ids, args.new, args.served_queries)
        sides["served_ttft"].append(ttft)
        sides["served_tpot"].append(tpot)
        load.append(os.getloadavg()[0])
    med = {name: statistics.median(values) for name, values in sides.items()}
    ratios = {
        name: med[name] / med["prefill" if "ttft" in name else "decode"] for name in names[2:]
    }
    verdict = "holds" if max(abs(r - 1) for r in ratios.values()) <= 0.2 else "FAILS"
    text = (
        "#### Token latencies of the stream handler against its steps timed apart\n\n"
        f"Run: {time.strftime('%Y-%m-%dT%H:%M:%S+00:00', time.gmtime())} by `python "
        f"benchmarks/bench_generation.py --rounds {args.rounds} --prompt {args.prompt} --new "
        f"{args.new}` (Llama from config: 4 layers, width 256, 8 heads / 4 KV heads, "
        f"vocabulary 8000; fp32, 1 thread; medians over {args.rounds} interleaved rounds; "
        f"load average {min(load):.1f}-{max(load):.1f} on {os.cpu_count()} CPUs):\n\n"
        "| figure | stream read directly | served (LoadGen single_stream, p50) | "
        "timed apart |\n| --- | --- | --- | --- |\n"
        f"| TTFT | {_ms(med['ttft'])} (**{ratios['ttft']:.3f}x**) | {_ms(med['served_ttft'])} "
        f"(**{ratios['served_ttft']:.3f}x**) | prefill {_ms(med['prefill'])} |\n"
        f"| TPOT | {_ms(med['tpot'])} (**{ratios['tpot']:.3f}x**) | {_ms(med['served_tpot'])} "
        f"(**{ratios['served_tpot']:.3f}x**) | decode step {_ms(med['decode'])} |\n\n"
        f"The 20% claim {verdict}.\n\n"
    )
    print(text, end="")
    if args.doc is not None:
        write_section(args.doc, "bench_generation", text)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


if __name__ == "__main__":
    main()
