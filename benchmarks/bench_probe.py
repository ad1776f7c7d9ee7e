"""What the per-block host probe costs: compare_benchmarks and measure_latency read the
process's CPU time (CLOCK_PROCESS_CPUTIME_ID) and its involuntary context switches
(getrusage) before and after every timed block, outside the timed region but inside the
sampling loop. This times blocks of an empty workload with the probe
(``probed_block``) and without it (``time_block``), side by side in interleaved rounds in
random order, and prints the cost per block in microseconds (process CPU time and wall
clock, median [IQR] over rounds) and as a share of a 1 ms block, the shortest a comparison
uses.

    .venv/bin/python benchmarks/bench_probe.py [--rounds 41] [--blocks 2000] [--doc PAGE]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from doc_sections import write_section

from torchscan_stages.measure.host import BlockTrace, process_probe
from torchscan_stages.measure.latency import probed_block, time_block


def _nothing() -> None:
    return None


def _sync() -> None:
    return None


def _loop(blocks: int, probed: bool) -> tuple[float, float]:
    """(wall, CPU) seconds per block of ``blocks`` one-call blocks of an empty workload."""
    probe, trace = process_probe(), BlockTrace()
    clock = time.perf_counter
    block: Callable[[], float]
    if probed:

        def block() -> float:
            return probed_block(_nothing, 1, _sync, clock, probe, trace)
    else:

        def block() -> float:
            return time_block(_nothing, 1, _sync, clock)

    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(blocks):
        block()
    return (time.perf_counter() - wall) / blocks, (time.process_time() - cpu) / blocks


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return median, q1, q3


def measure(rounds: int, blocks: int) -> dict[str, tuple[float, float, float]]:
    """Per-round differences (probed - plain) per block, for wall and CPU time, in µs."""
    rng = random.Random(0)
    found: dict[str, list[float]] = {"wall": [], "cpu": [], "plain_wall": [], "plain_cpu": []}
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(rounds):
        order = [False, True] if rng.random() < 0.5 else [True, False]
        got = {probed: _loop(blocks, probed) for probed in order}
        found["wall"].append((got[True][0] - got[False][0]) * 1e6)
        found["cpu"].append((got[True][1] - got[False][1]) * 1e6)
        found["plain_wall"].append(got[False][0] * 1e6)
        found["plain_cpu"].append(got[False][1] * 1e6)
    result = {key: _quartiles(values) for key, values in found.items()}
    share = (time.process_time() - cpu) / (time.perf_counter() - wall)
    result["share"] = (share, share, share)
    return result


def section(result: dict[str, tuple[float, float, float]], rounds: int, blocks: int) -> str:
    def cell(key: str) -> str:
        median, q1, q3 = result[key]
        return f"{median:.2f} µs [{q1:.2f}-{q3:.2f}]"

    load = os.getloadavg()[0]
    share = result["cpu"][0] / 1000.0
    return (
        "## Cost of the per-block host probe\n\n"
        f"Run: {time.strftime('%Y-%m-%dT%H:%M:%S+00:00', time.gmtime())} by "
        f"`python benchmarks/bench_probe.py --rounds {rounds} --blocks {blocks}` on a shared "
        f"2-core machine (1-minute load average {load:.1f} at the end, from other work). "
        f"{rounds} interleaved rounds in random order of {blocks} one-call blocks of an empty "
        "workload, with the probe (`probed_block`: process CPU time and getrusage before and "
        "after the block, outside the timed region) and without it (`time_block`); median "
        "[IQR] over rounds.\n\n"
        "| what | process CPU time | wall clock |\n| --- | --- | --- |\n"
        f"| block without the probe | {cell('plain_cpu')} | {cell('plain_wall')} |\n"
        f"| added by the probe, per block | {cell('cpu')} | {cell('wall')} |\n\n"
        f"Against a 1 ms block (the shortest a comparison times) the probe adds "
        f"{share:.2%} of CPU time per block, outside the block's own timed region. The "
        "wall-clock cost is the CPU cost divided by the share of a core this process got "
        f"while the rest of the host ran ({result['share'][0]:.0%} over the run), not a cost "
        "of its own: it lengthens a comparison, never a timed block.\n\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--blocks", type=int, default=2000)
    parser.add_argument("--doc", type=Path, default=None)
    args = parser.parse_args()
    result = measure(args.rounds, args.blocks)
    text = section(result, args.rounds, args.blocks)
    print(text)
    if args.doc is not None:
        write_section(args.doc, "bench_probe", text)


if __name__ == "__main__":
    main()
