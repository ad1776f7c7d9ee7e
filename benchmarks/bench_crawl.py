"""crawl_module against its mechanism floors and ptflops, side by side in one run (1 thread).

Per model, one round times every variant once, in an order that rotates from round to round:
a plain ``no_grad`` forward, the two mechanism floors (an empty dispatch mode; empty global
module hooks; benchmarks/peers.py), the operator counter alone (what a full crawl adds on top
of it is the crawl's own share), ``crawl_module`` full and structure, and ptflops (when
importable: run this under ``benchmarks/.venv``). Each ratio is taken within its round
(variant / plain of the same round); the table gives median [IQR] over rounds, for process
CPU time and for wall time. The bars, judged on the CPU-time median:

* ResNet-50-shaped CNN and Transformer: full <= dispatch floor + hooks floor - 1 + 0.10;
* 5,000 blocks: full no slower per block than ptflops (same model, same plain forward: the
  per-block ratio is the ratio to plain), structure <= 4x a plain forward;
* DeepSeek-V3-shaped MoE on ``meta`` (46,848 Linear calls): a full crawl in a fresh child
  process within 30 s and 2 GiB peak RSS (the child's own ``VmHWM``).

``--scaffolding`` times each speed shortcut against the plain path behind it instead
(benchmarks/scaffolding.py). ``--attribution`` also times the per-layer operator FLOPs step
(``layer_records.operator_flops``)
inside full crawls of the CNN and GPT-2 (bar: at most 1.05x). ``--quick`` runs fewer
rounds; ``--doc docs/benchmarks.md`` writes the ``bench_crawl`` block
there (atomically, between its markers); ``--markdown`` prints it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from doc_sections import markers, write_section  # benchmarks/doc_sections.py
from models import moe_model, resnet50_shaped, scaling_model, transformer_encoder
from peers import run_empty_dispatch, run_empty_hooks
from torch import nn

from torchscan_stages.analysis import layer_records
from torchscan_stages.analysis.crawl import crawl_module
from torchscan_stages.analysis.operators import OperatorCounter

HERE = Path(__file__).resolve().parent
VARIANTS = (
    "plain",
    "dispatch floor",
    "hooks floor",
    "operator counter",
    "crawl full",
    "crawl structure",
    "ptflops",
)
MOE_SECONDS, MOE_GIB = 30.0, 2.0


def _variants(model: nn.Module, x: torch.Tensor) -> dict[str, Callable[[], object]]:
    def plain() -> None:
        with torch.no_grad():
            model(x)

    def counter() -> None:  # the full crawl's operator counting alone (analysis/operators/)
        with torch.no_grad(), OperatorCounter():
            model(x)

    calls: dict[str, Callable[[], object]] = {
        "plain": plain,
        "operator counter": counter,
        "dispatch floor": lambda: run_empty_dispatch(model, x),
        "hooks floor": lambda: run_empty_hooks(model, x),
        "crawl full": lambda: crawl_module(model, args=(x,)),
        "crawl structure": lambda: crawl_module(model, args=(x,), mode="structure"),
    }
    try:
        import ptflops  # noqa: F401  (only in benchmarks/.venv)
        from peers import run_ptflops

        calls["ptflops"] = lambda: run_ptflops(model, x)
    except ImportError:
        pass
    return calls


def _rounds(calls: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[list[float]]]:
    """Per variant, per round: [cpu ratio, wall ratio] to the plain forward of that round."""
    for call in calls.values():
        call()  # warm-up
    names = list(calls)
    ratios: dict[str, list[list[float]]] = {name: [] for name in names if name != "plain"}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        cpu: dict[str, float] = {}
        wall: dict[str, float] = {}
        for name in order:
            c0, w0 = time.process_time(), time.perf_counter()
            calls[name]()
            cpu[name], wall[name] = time.process_time() - c0, time.perf_counter() - w0
        for name in ratios:
            ratios[name].append([cpu[name] / cpu["plain"], wall[name] / wall["plain"]])
    return ratios


def _stat(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=4)
    return statistics.median(values), q[0], q[2]


def _fmt(values: list[float]) -> str:
    med, lo, hi = _stat(values)
    return f"{med:.2f} [{lo:.2f}-{hi:.2f}]"


def _bars(model: str, med: dict[str, float]) -> list[tuple[str, float, float]]:
    """(what, measured, bar) rows for one model, from CPU-time medians."""
    if model == "scaling_5000":
        rows = [("crawl structure <= 4x plain", med["crawl structure"], 4.0)]
        if "ptflops" in med:
            rows.insert(0, ("crawl full per block <= ptflops", med["crawl full"], med["ptflops"]))
        return rows
    bar = med["dispatch floor"] + med["hooks floor"] - 1 + 0.10
    return [("crawl full <= dispatch + hooks - 1 + 0.10", med["crawl full"], bar)]


def _models(quick: bool) -> list[tuple[str, nn.Module, torch.Tensor, int]]:
    torch.manual_seed(0)
    return [
        ("resnet50", resnet50_shaped().eval(), torch.randn(1, 3, 224, 224), 7 if quick else 15),
        ("transformer", transformer_encoder().eval(), torch.randn(1, 128, 256), 9 if quick else 21),
        ("scaling_5000", scaling_model(5000).eval(), torch.randn(1, 16), 3 if quick else 7),
    ]


def moe_child() -> None:
    """In a fresh process: build the MoE on meta, crawl it, print seconds and peak RSS.

    Peak RSS is ``VmHWM``, not ``getrusage``'s ``ru_maxrss``: Linux carries the latter over
    exec, so a child of this parent (models built, torch loaded) would report the parent's.
    """
    from torchscan_stages.measure.rss_phases import proc_status_bytes

    torch.set_num_threads(1)
    start = time.perf_counter()
    model = moe_model()
    built = time.perf_counter()
    report = crawl_module(model, args=(torch.empty(1, 7168, device="meta"),))
    crawl_s = time.perf_counter() - built
    peak = proc_status_bytes("VmHWM")
    if peak is None:
        raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")
    linear = sum(1 for layer in report.layers if layer.type == "Linear")
    print(
        json.dumps(
            {
                "build_s": built - start,
                "crawl_s": crawl_s,
                "peak_rss_bytes": peak,
                "records": len(report.layers),
                "linear_calls": linear,
                "linear_macs": sum(
                    layer.metrics.macs.value or 0
                    for layer in report.layers
                    if layer.type == "Linear"
                ),
            }
        )
    )


def _moe_row() -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--moe-child"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        cwd=HERE,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _gpt2() -> tuple[nn.Module, dict[str, torch.Tensor]] | None:
    try:
        from torchscan_stages.integrations.hf_models import build_hf_model, token_inputs
    except ImportError:
        return None
    config = {"n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257}
    try:  # transformers is in the project's .venv (the hf extra), not in benchmarks/.venv
        model = build_hf_model("GPT2Config", model_class="AutoModelForCausalLM", **config)
    except ImportError:
        print("gpt2: skipped (transformers not installed in this interpreter)")
        return None
    return model, token_inputs(batch_size=1, seq_len=128, vocab_size=50257)


def attribution_overhead(name: str, run: Callable[[], object], repeats: int) -> None:
    """Share of a full crawl spent on the per-layer operator FLOPs, two ways.

    Timed inside: the step itself (``layer_records.operator_flops``, wrapped with a timer)
    against the whole crawl, which is robust on a loaded machine; and side by side: crawls
    with the step against crawls with it switched off, interleaved (noisier).
    """
    attribute = layer_records.operator_flops
    inside: list[float] = []

    def timed(*args: object) -> object:
        start = time.perf_counter()
        try:
            return attribute(*args)  # type: ignore[arg-type]
        finally:
            inside.append(time.perf_counter() - start)

    with_step, without = [], []
    run()  # warm-up
    try:
        for _ in range(repeats):
            for switched_off, times in ((False, with_step), (True, without)):
                layer_records.operator_flops = (  # type: ignore[assignment]
                    (lambda calls, owner_ops: None) if switched_off else timed
                )
                start = time.perf_counter()
                run()
                times.append(time.perf_counter() - start)
    finally:
        layer_records.operator_flops = attribute  # type: ignore[assignment]
    crawl, step = statistics.median(with_step), statistics.median(inside)
    print(
        f"{name:<22} per-layer operator FLOPs: crawl {crawl * 1e3:8.1f} ms, step "
        f"{step * 1e3:6.2f} ms -> {1 + step / (crawl - step):5.3f}x timed inside, "
        f"{crawl / statistics.median(without):5.3f}x side by side (target 1.05)"
    )


def _attribution(repeats: int) -> None:
    cnn, image = resnet50_shaped().eval(), torch.randn(1, 3, 224, 224)
    attribution_overhead("resnet50-shaped 224", lambda: crawl_module(cnn, args=(image,)), repeats)
    gpt2 = _gpt2()
    if gpt2 is not None:
        model, tokens = gpt2
        attribution_overhead("gpt2 124M L128", lambda: crawl_module(model, kwargs=tokens), repeats)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--doc", type=Path, default=None, help="write the bench_crawl block")
    parser.add_argument("--attribution", action="store_true", help="per-layer FLOPs step")
    parser.add_argument("--moe-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--scaffolding", action="store_true", help="A/B each speed shortcut (scaffolding.py)"
    )
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        help="these models only (resnet50 transformer "
        "scaling_5000 moe); for iterating, not for the docs block",
    )
    options = parser.parse_args()
    if options.moe_child:
        moe_child()
        return
    if options.doc is not None and options.only is not None:
        parser.error("--doc records every model: drop --only")
    torch.set_num_threads(1)
    if options.scaffolding:
        from scaffolding import run  # benchmarks/scaffolding.py

        chosen = [
            m for m in _models(options.quick) if options.only in (None, []) or m[0] in options.only
        ]
        print("\n".join(run(chosen)))
        return
    if options.attribution:
        _attribution(3 if options.quick else 7)
    lines = [
        "## crawl_module against its mechanism floors and ptflops",
        "",
        f"Run: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')} by `python "
        f"benchmarks/bench_crawl.py{' --quick' if options.quick else ''}` (benchmarks/.venv) on "
        f"{platform.machine()}, {os.cpu_count()} logical cores, shared with other work, torch "
        f"{torch.__version__}, Python {platform.python_version()}, 1 thread. Ratio to a plain "
        "no_grad forward of the same round, median [IQR] over interleaved rounds in rotating "
        "order, process CPU time (wall-time median in parentheses). Floors: the forward under an "
        "empty dispatch mode / empty global module hooks (benchmarks/peers.py); operator counter = "
        "the forward under `OperatorCounter()` alone, the full crawl's counting. Per block on "
        "5,000 blocks = ratio x plain / 5,000, so per-block order is the ratio's.",
        "",
        "| model | rounds | " + " | ".join(VARIANTS[1:]) + " |",
        "|---|---|" + "---|" * (len(VARIANTS) - 1),
    ]
    verdicts: list[str] = []
    for name, model, x, rounds in _models(options.quick):
        if options.only is not None and name not in options.only:
            continue
        ratios = _rounds(_variants(model, x), rounds)
        cells = []
        for variant in VARIANTS[1:]:
            if variant not in ratios:
                cells.append("—")
                continue
            cpu = [r[0] for r in ratios[variant]]
            wall = [r[1] for r in ratios[variant]]
            cells.append(f"{_fmt(cpu)} ({statistics.median(wall):.2f})")
        lines.append(f"| {name} | {rounds} | " + " | ".join(cells) + " |")
        med = {v: statistics.median(r[0] for r in rs) for v, rs in ratios.items()}
        if "operator counter" in med:
            verdicts.append(
                f"* {name}: crawl full - operator counter = "
                f"{med['crawl full'] - med['operator counter']:+.2f}x (the crawl's own share: "
                "hooks, handlers, records, report; no bar)"
            )
        for what, got, bar in _bars(name, med):
            verdicts.append(
                f"* {name}: {what}: {got:.2f}x vs bar {bar:.2f}x -> "
                f"holds: {'yes' if got <= bar else 'no'}"
            )
        print(lines[-1], flush=True)
    if options.only is None or "moe" in options.only:
        verdicts.append(_moe_verdict(_moe_row()))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines += ["", f"Bars (CPU-time medians; load average {load:.2f} at the end):", "", *verdicts]
    print("\n".join(verdicts))
    text = "\n".join(lines) + "\n"
    if options.markdown:
        begin, end = markers("bench_crawl")
        print(f"\n{begin}\n{text}{end}")
    if options.doc is not None:
        write_section(options.doc, "bench_crawl", text)


def _moe_verdict(moe: dict[str, Any]) -> str:
    gib = moe["peak_rss_bytes"] / 2**30
    return (
        f"* MoE on meta ({moe['records']:,} module calls, {moe['linear_calls']:,} Linear): "
        f"crawl {moe['crawl_s']:.1f} s (model built in {moe['build_s']:.1f} s), peak RSS "
        f"{gib:.2f} GiB; bar {MOE_SECONDS:.0f} s and {MOE_GIB:.0f} GiB -> holds: "
        f"{'yes' if moe['crawl_s'] <= MOE_SECONDS and gib <= MOE_GIB else 'no'}"
    )


if __name__ == "__main__":
    main()
