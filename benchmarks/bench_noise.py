"""Timing on a quiet and on a loaded host: the must-hold figures of docs/methodology.md.

Runs, in one process and one go:

1. quiet host: 20 A/A comparisons of 1.00 ms busy loops (never faster or slower) and 20
   comparisons of 1.00 ms against 1.05 ms (slower at least 18 times, the interval covers
   the true ratio 1.05 at least 19 times), minimum effect 2%;
2. loaded host: the script starts one busy-loop process per core (each stops itself after
   a bounded time and is terminated on exit), then 20 A/A comparisons and 20 comparisons of
   1.0 ms against 1.3 ms (the interval covers 1.30 at least 18 times, slower at least 15
   times, never faster, each comparison at most 10 s), minimum effect 5%;
3. measure_latency on a >= 1 ms matmul, 5 repeats of at most 2 s each: the spread of the
   reported medians (max - min) / median, against torch.utils.benchmark's
   blocked_autorange given the same time per repeat (quiet host), on a 2 ms fixed-work loop
   and on a matmul.

A busy loop spins on time.perf_counter until its deadline, so the true ratio of two loops
is known by construction; a preemption lengthens it only when it straddles the deadline.
Fixed-work loops (iterations in the ratio 1.3) are run too, under load, because there a
preemption adds all the time it took; their true ratio is only nominal (the loop's cost is
close to, not exactly, linear in its iterations), so they are reported beside the bars.
This machine may be shared: the "quiet" host is only as quiet as the other jobs on it, and
the script prints the load it saw.

    .venv/bin/python benchmarks/bench_noise.py [--runs 20] [--budget 6] [--repeats 5]
    .venv/bin/python benchmarks/bench_noise.py --table --runs 20   # the pressure table
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psutil
import torch
from noise_pressure import PAIRS, PRESSURES, pressure_table, pyperf_installed, pyperf_note
from torch.utils.benchmark import Timer

from torchscan_stages.compare.benchmarks import compare_benchmarks
from torchscan_stages.compare.interleave import LOCATION_LEVEL
from torchscan_stages.measure.latency import measure_latency
from torchscan_stages.stats import quantile


def busy(seconds: float) -> Callable[[], int]:
    """A CPU-bound call that spins until ``seconds`` have passed."""

    def call() -> int:
        end = time.perf_counter() + seconds
        spins = 0
        while time.perf_counter() < end:
            spins += 1
        return 1

    return call


def fixed_work(iterations: int) -> Callable[[], int]:
    """A CPU-bound call of fixed work: preemption lengthens it by the time it lost."""

    def call() -> int:
        for _ in range(iterations):
            pass
        return 1

    return call


def iterations_for(seconds: float) -> int:
    """Loop iterations that take about ``seconds`` (fastest of 20 trial calls)."""
    trial = 100_000
    call = fixed_work(trial)
    best = min(_timed(call) for _ in range(20))
    return max(1, round(trial * seconds / best))


def _timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _spin(limit_s: float, niced: bool = False) -> None:
    if niced:
        os.nice(19)
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        pass


@contextmanager
def cpu_load(processes: int, limit_s: float, *, niced: bool = False) -> Iterator[list[int]]:
    """``processes`` busy-loop processes (at nice 19 when ``niced``), each bounded to
    ``limit_s`` and terminated on exit."""
    context = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    workers = [
        context.Process(target=_spin, args=(limit_s, niced), daemon=True)  # type: ignore[attr-defined]
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    try:
        time.sleep(0.5)  # let the load settle
        yield [worker.pid or 0 for worker in workers]
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.join(timeout=5)


@dataclass
class Outcome:
    verdict: str
    ratio: float
    low: float
    high: float
    seconds: float
    stop: str


def compare_once(
    base: Callable[[], int], cand: Callable[[], int], *, min_effect: float, budget: float, seed: int
) -> Outcome:
    started = time.perf_counter()
    result = compare_benchmarks(
        base,
        cand,
        check=lambda a, b: a == b,
        options={"max_run_time": budget},
        judge={"min_effect": min_effect, "ci_floor": min(0.005, min_effect / 4), "seed": seed},
    )
    took = time.perf_counter() - started
    latency = result.deltas[0]
    assert latency.ratio is not None and latency.ci_low is not None and latency.ci_high is not None
    return Outcome(
        latency.verdict,
        latency.ratio,
        latency.ci_low,
        latency.ci_high,
        took,
        str(result.settings.get("stop_reason")),
    )


def scenario(
    label: str,
    base_s: float,
    cand_s: float,
    runs: int,
    *,
    min_effect: float,
    budget: float,
    make: Callable[[float], Callable[[], int]] = busy,
) -> dict[str, Any]:
    true_ratio = cand_s / base_s
    outcomes = [
        compare_once(make(base_s), make(cand_s), min_effect=min_effect, budget=budget, seed=i)
        for i in range(runs)
    ]
    verdicts = [o.verdict for o in outcomes]
    summary = {
        "label": label,
        "runs": runs,
        "true_ratio": true_ratio,
        "slower": verdicts.count("slower"),
        "faster": verdicts.count("faster"),
        "no_difference": verdicts.count("no_difference"),
        "inconclusive": verdicts.count("inconclusive"),
        "covered": sum(o.low <= true_ratio <= o.high for o in outcomes),
        "max_seconds": max(o.seconds for o in outcomes),
        "median_ratio": sorted(o.ratio for o in outcomes)[runs // 2],
        "narrow_stops": sum(o.stop == "interval_narrower_than_min_effect" for o in outcomes),
    }
    print(
        f"{label:<34} slower {summary['slower']:>2}  faster {summary['faster']:>2}  "
        f"no_diff {summary['no_difference']:>2}  inconcl {summary['inconclusive']:>2}  "
        f"covers {true_ratio:.2f}: {summary['covered']:>2}/{runs}  "
        f"median ratio {summary['median_ratio']:.4f}  longest {summary['max_seconds']:.1f} s  "
        f"stopped narrow {summary['narrow_stops']}/{runs}",
        flush=True,
    )
    return summary


def _matmul() -> Callable[[], torch.Tensor]:
    a = torch.randn(384, 384)
    b = torch.randn(384, 384)
    return lambda: a @ b


def repeatability(
    label: str, workload: Callable[[], Any], repeats: int, budget: float
) -> tuple[float, float, float]:
    """Spread (max-min)/median of measure_latency's and blocked_autorange's medians."""
    for _ in range(50):
        workload()
    ours: list[float] = []
    theirs: list[float] = []
    ours_low: list[float] = []
    theirs_low: list[float] = []
    spent: list[float] = []
    for _ in range(repeats):
        started = time.perf_counter()
        report = measure_latency(
            workload,
            options={"max_run_time": 0.8 * budget, "min_run_time": budget / 4},
        )
        spent.append(time.perf_counter() - started)
        assert report.latency is not None and report.latency.warmed.value is not None
        ours.append(report.latency.warmed.value)
        ours_low.append(quantile(report.latency.block_times_s, LOCATION_LEVEL))
        timer = Timer(stmt="workload()", globals={"workload": workload}, num_threads=1)
        measurement = timer.blocked_autorange(min_run_time=spent[-1])
        theirs.append(measurement.median)
        theirs_low.append(quantile(measurement.times, LOCATION_LEVEL))

    def spread(values: list[float]) -> float:
        middle = sorted(values)[len(values) // 2]
        return (max(values) - min(values)) / middle

    print(
        f"{label}: measure_latency median {sorted(ours)[repeats // 2] * 1e3:.3f} ms, spread of "
        f"{repeats} medians {spread(ours):.2%}, longest repeat {max(spent):.2f} s; "
        f"blocked_autorange (same time) median {sorted(theirs)[repeats // 2] * 1e3:.3f} ms, "
        f"spread {spread(theirs):.2%}; lower deciles (the comparison's location): "
        f"{spread(ours_low):.2%} vs {spread(theirs_low):.2%}",
        flush=True,
    )
    return spread(ours), spread(theirs), max(spent)


def _host(label: str) -> None:
    load = [round(x, 2) for x in psutil.getloadavg()]
    print(f"[{label}] load average {load} on {psutil.cpu_count()} logical CPUs", flush=True)


def _bar(name: str, ok: bool, detail: str) -> bool:
    print(f"  {'HOLDS' if ok else 'MISSED':<6} {name}: {detail}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--budget", type=float, default=6.0, help="max_run_time per comparison")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--table",
        action="store_true",
        help="print the pressure table instead (0-16 busy processes, plain and niced; "
        "--runs per cell, 20 for the full size)",
    )
    parser.add_argument(
        "--pressures",
        default=None,
        help="with --table: comma-separated N or Nn (niced), e.g. 0,2,4n,16 (default: all)",
    )
    parser.add_argument(
        "--pairs", default=None, help="with --table: comma-separated pair names, e.g. A/A,1.3x"
    )
    parser.add_argument("--json", default=None, help="with --table: also write the rows here")
    parser.add_argument(
        "--no-tub",
        action="store_true",
        help="with --table: skip torch.utils.benchmark beside each run (half the time)",
    )
    parser.add_argument(
        "--pyperf-runs",
        type=int,
        default=0,
        help="with --table: the first N runs of each cell also go through pyperf",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.table:
        chosen: tuple[tuple[int, bool], ...] = PRESSURES
        if args.pressures:
            chosen = tuple((int(x.rstrip("n")), x.endswith("n")) for x in args.pressures.split(","))
        pairs: tuple[tuple[str, float], ...] = PAIRS
        if args.pairs:
            pairs = tuple(p for p in PAIRS if p[0] in args.pairs.split(","))
        _host("pressure table")
        perf_runs = args.pyperf_runs if pyperf_installed() else 0
        rows = pressure_table(
            args.runs, busy, cpu_load, chosen, pairs, perf_runs, tub=not args.no_tub
        )
        if args.json:
            with open(args.json, "w", encoding="utf-8") as handle:
                json.dump(rows, handle, indent=1)
        print(pyperf_note(perf_runs))
        _host("after the table")
        return
    runs = args.runs
    _host("quiet")
    quiet_aa = scenario("quiet A/A 1.00 ms", 1e-3, 1e-3, runs, min_effect=0.02, budget=args.budget)
    quiet = scenario(
        "quiet 1.00 vs 1.05 ms", 1e-3, 1.05e-3, runs, min_effect=0.02, budget=args.budget
    )
    per_ms = iterations_for(1e-3)
    print(f"fixed-work loop: {per_ms} iterations ~ 1 ms", flush=True)

    def loop(seconds: float) -> Callable[[], int]:
        return fixed_work(round(per_ms * seconds / 1e-3))

    quiet_fixed = scenario(
        "quiet fixed work 1.0 vs 1.3 ms",
        1e-3,
        1.3e-3,
        runs,
        min_effect=0.05,
        budget=args.budget,
        make=loop,
    )
    ours, theirs, longest = repeatability("2 ms fixed-work loop", loop(2e-3), args.repeats, 2.0)
    repeatability("384x384 matmul", _matmul(), args.repeats, 2.0)
    cores = psutil.cpu_count() or 1
    limit = 2 * runs * (args.budget + 3) + 60
    with cpu_load(cores, limit) as pids:
        _host(f"loaded, {len(pids)} busy-loop processes")
        loaded_aa = scenario(
            "loaded A/A 1.0 ms", 1e-3, 1e-3, runs, min_effect=0.05, budget=args.budget
        )
        loaded = scenario(
            "loaded 1.0 vs 1.3 ms", 1e-3, 1.3e-3, runs, min_effect=0.05, budget=args.budget
        )
        loaded_fixed = scenario(
            "loaded fixed work 1.0 vs 1.3 ms",
            1e-3,
            1.3e-3,
            runs,
            min_effect=0.05,
            budget=args.budget,
            make=loop,
        )
    print("\nMust-hold bars:")
    scale = runs / 20
    _bar(
        "quiet A/A never faster/slower",
        quiet_aa["slower"] + quiet_aa["faster"] == 0,
        f"{quiet_aa['slower']} slower, {quiet_aa['faster']} faster of {runs}",
    )
    _bar("quiet 1.05 slower >= 18/20", quiet["slower"] >= 18 * scale, f"{quiet['slower']}/{runs}")
    _bar("quiet covers 1.05 >= 19/20", quiet["covered"] >= 19 * scale, f"{quiet['covered']}/{runs}")
    _bar(
        "loaded A/A never faster/slower",
        loaded_aa["slower"] + loaded_aa["faster"] == 0,
        f"{loaded_aa['slower']} slower, {loaded_aa['faster']} faster of {runs}",
    )
    _bar(
        "loaded covers 1.30 >= 18/20",
        loaded["covered"] >= 18 * scale,
        f"{loaded['covered']}/{runs}",
    )
    _bar(
        "loaded slower >= 15/20, never faster",
        loaded["slower"] >= 15 * scale and loaded["faster"] == 0,
        f"{loaded['slower']} slower, {loaded['faster']} faster",
    )
    longest_cmp = max(s["max_seconds"] for s in (loaded_aa, loaded, loaded_fixed))
    _bar("loaded comparison <= 10 s", longest_cmp <= 10.0, f"longest {longest_cmp:.1f} s")
    _bar(
        "fixed work (not a bar; iterations x1.3)",
        loaded_fixed["faster"] == 0,
        f"quiet median ratio {quiet_fixed['median_ratio']:.4f}, loaded "
        f"{loaded_fixed['median_ratio']:.4f}, loaded covers 1.30 "
        f"{loaded_fixed['covered']}/{runs}, slower {loaded_fixed['slower']}/{runs}",
    )
    _bar("latency medians within 1%", ours <= 0.01, f"spread {ours:.2%}")
    _bar("latency repeat <= 2 s", longest <= 2.0, f"longest {longest:.2f} s")
    _bar("spread below blocked_autorange", ours < theirs, f"{ours:.2%} vs {theirs:.2%}")


if __name__ == "__main__":
    main()
