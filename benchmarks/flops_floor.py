"""measure_flops against the dispatch floor: the overhead bars, timed side by side.

For each model (ResNet-50-shaped CNN, Transformer, 5,000 blocks; the ``make bench`` builds,
mixed training flags, eval maths) one round times three runners back to back, in an order
that rotates every round: the plain ``no_grad`` forward, the same forward under an empty
``TorchDispatchMode`` (the *dispatch floor*: every operator through Python dispatch, nothing
counted; peers.py's definition) and ``measure_flops`` of that forward. Ratios are taken
within a round, so machine load that slows a round slows all three; median and IQR are over
rounds, as many as fit a time budget per model (``--budget``, default 12 s; ``--quick``:
2 s). Bars: ``measure_flops / plain <= floor / plain + 0.05`` (CNN, Transformer) and
``measure_flops / floor <= 2`` (5,000 blocks). A benchmark script, never a test.
"""

from __future__ import annotations

import cProfile
import datetime as dt
import os
import platform
import pstats
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from doc_sections import write_section  # benchmarks/doc_sections.py
from models import BenchModel, model_set, set_mixed_modes
from peers import _EmptyDispatchMode

from torchscan_stages.analysis.operators import measure_flops
from torchscan_stages.stats import quartiles

MODELS = ("resnet50", "transformer", "scaling_5000")


def _runners(model: torch.nn.Module, x: torch.Tensor) -> dict[str, Callable[[], Any]]:
    def workload() -> Any:
        with torch.no_grad():
            return model(x)

    def floor() -> Any:
        with torch.no_grad(), _EmptyDispatchMode():
            return model(x)

    return {"plain": workload, "floor": floor, "measure_flops": lambda: measure_flops(workload)}


def _quartiles(values: list[float]) -> tuple[float, float]:
    """(median, IQR) of the per-round values (the package's linear quartiles)."""
    q1, median, q3 = quartiles(values)
    return median, q3 - q1


def _ratios(seconds: dict[str, list[float]]) -> dict[str, tuple[float, float]]:
    """Median [IQR] over rounds of the within-round ratios."""
    plain, floor, ours = seconds["plain"], seconds["floor"], seconds["measure_flops"]
    pairs = {
        "floor/plain": (floor, plain),
        "ours/plain": (ours, plain),
        "ours/floor": (ours, floor),
    }
    return {
        key: _quartiles([a / b for a, b in zip(top, bottom, strict=True)])
        for key, (top, bottom) in pairs.items()
    }


def rounds_for(seconds_per_round: float, repeats: int, budget_s: float) -> int:
    """At least ``repeats`` rounds, more while they fit in ``budget_s``: a 7 ms model gets
    hundreds of rounds (its median is otherwise as noisy as the 0.05 bar), an 80 ms one tens."""
    return max(repeats, int(budget_s / max(seconds_per_round, 1e-6)))


def time_model(bm: BenchModel, repeats: int, budget_s: float = 0.0) -> list[dict[str, Any]]:
    """One row per clock (wall; process CPU, which other processes' load does not inflate)."""
    model = set_mixed_modes(bm.build())
    runners = _runners(model, bm.make_input())
    names = list(runners)
    for run in runners.values():  # warm-up: allocator, per-operator caches
        run()
    start = time.perf_counter()  # a second, warm round sizes the rounds
    for run in runners.values():
        run()
    repeats = rounds_for(time.perf_counter() - start, repeats, budget_s)
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeats):
        shift = round_ % len(names)  # rotate who runs first
        for name in names[shift:] + names[:shift]:
            w, c = time.perf_counter(), time.process_time()
            runners[name]()
            cpu[name].append(time.process_time() - c)
            wall[name].append(time.perf_counter() - w)
    return [
        {
            "model": bm.name,
            "clock": clock,
            "rounds": repeats,
            "plain_ms": statistics.median(seconds["plain"]) * 1e3,
            "ours_ms": statistics.median(seconds["measure_flops"]) * 1e3,
            "ratios": _ratios(seconds),
        }
        for clock, seconds in (("wall", wall), ("cpu", cpu))
    ]


def verdict(row: dict[str, Any]) -> tuple[str, bool]:
    """The overhead bar for this model, and whether the medians meet it."""
    r = row["ratios"]
    if row["model"].startswith("scaling"):
        return "ours/floor <= 2", r["ours/floor"][0] <= 2.0
    bar = r["floor/plain"][0] + 0.05
    return f"ours/plain <= {bar:.3f} (floor + 0.05)", r["ours/plain"][0] <= bar


def _fmt(pair: tuple[float, float]) -> str:
    return f"{pair[0]:.3f} [{pair[1]:.3f}]"


def load_average() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def section(rows: list[dict[str, Any]], command: str, load_start: float) -> str:
    lines = [
        "## measure_flops against the dispatch floor",
        "",
        f"Run: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')} by `{command}` on "
        f"{platform.machine()}, {os.cpu_count()} logical cores, shared with other work "
        f"(load average {load_start:.2f} at the start, {load_average():.2f} at the end), torch "
        f"{torch.__version__}, threads {torch.get_num_threads()}. Three runners per round in "
        "rotating order; ratios taken within a round (load slows all three), median [IQR] over "
        "rounds (as many as fit the time budget per model). Floor = the forward under an empty "
        "TorchDispatchMode.",
        "",
        "| model | clock | rounds | plain ms | measure_flops ms | floor / plain "
        "| measure_flops / plain | measure_flops / floor | bar | holds |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for row in rows:
        bar, ok = verdict(row)
        r = row["ratios"]
        lines.append(
            f"| `{row['model']}` | {row['clock']} | {row['rounds']} | {row['plain_ms']:.2f} | "
            f"{row['ours_ms']:.2f} | {_fmt(r['floor/plain'])} | {_fmt(r['ours/plain'])} | "
            f"{_fmt(r['ours/floor'])} | {bar} | {'yes' if ok else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def profile(name: str, calls: int = 20) -> None:
    """cProfile of ``calls`` measure_flops calls on one model, by own time."""
    bm = next(b for b in model_set("full") if b.name == name)
    runners = _runners(set_mixed_modes(bm.build()), bm.make_input())
    runners["measure_flops"]()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        runners["measure_flops"]()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def floors_main(
    repeats: int,
    doc: Path | None,
    profile_model: str | None,
    *,
    budget_s: float = 12.0,
    command: str = "python benchmarks/bench_flops.py --floors",
) -> None:
    """The bars on the three models, ``budget_s`` of timing rounds each (at least
    ``repeats`` rounds); prints the section and writes it into ``doc`` when given."""
    if profile_model:
        profile(profile_model)
        return
    load_start = load_average()
    rows = [
        row
        for bm in model_set("full")
        if bm.name in MODELS
        for row in time_model(bm, repeats, budget_s)
    ]
    text = section(rows, command, load_start)
    print(text)
    if doc is not None:
        write_section(doc, "bench_flops", text)
