"""Does a tool call's process CPU time stay put? The overhead table's premise (CPU time does
not grow while other jobs hold the core), tested on a few cells of it: the same cell, quiet,
beside N busy loops forked from this process, beside N busy loops started as fresh
interpreters (no copy-on-write pages shared with this one), and quiet again, with the
user/system split and minor page faults of each; once with Python's cyclic GC on during the
timed calls (the table's method before session 8) and once off (the table's method now).

    benchmarks/.venv/bin/python benchmarks/bench_cpu_inflation.py [--busy 4] [--doc PAGE]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import suite
import torch
from bench_noise import cpu_load
from doc_sections import write_section
from models import model_set
from peers import PEERS

CELLS = (
    ("scaling_100", "torch FlopCounterMode"),
    ("recurrent", "torchscan 0.2"),
    ("scaling_100", "measure_flops"),
    ("scaling_100", "floor: empty module hooks"),
)
ROUNDS = 15
SPIN = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end: pass\n"


@contextmanager
def spawned_load(processes: int, limit_s: float) -> Iterator[None]:
    """``processes`` busy loops in fresh interpreters, killed on exit."""
    spin = SPIN.format(limit=limit_s)
    workers = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(processes)]
    try:
        time.sleep(0.5)
        yield
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()


def measure(condition: str) -> list[dict[str, Any]]:
    models = {b.name: b for b in model_set("full")}
    peers = {p.name: p for p in PEERS}
    rows = []
    for model_name, tool in CELLS:
        bench = models[model_name]
        before = resource.getrusage(resource.RUSAGE_SELF)
        cell = suite.overhead_rounds(peers[tool], bench.build(), bench.make_input(), ROUNDS, seed=3)
        after = resource.getrusage(resource.RUSAGE_SELF)
        row = {
            "gc": "off" if suite.GC_OFF_WHILE_TIMING else "on",
            "condition": condition,
            "model": model_name,
            "tool": tool,
            "ratio": cell["ratio"]["median"],
            "q1": cell["ratio"]["q1"],
            "q3": cell["ratio"]["q3"],
            "user_s": after.ru_utime - before.ru_utime,
            "sys_s": after.ru_stime - before.ru_stime,
            "minor_faults": after.ru_minflt - before.ru_minflt,
            "switches": sum(cell["involuntary_switches"]),
        }
        print(
            f"gc {row['gc']:<3} {condition:<16} {model_name:<12} {tool:<26} "
            f"ratio {row['ratio']:6.2f} "
            f"[{row['q1']:.2f}-{row['q3']:.2f}] user {row['user_s']:5.2f} s "
            f"sys {row['sys_s']:4.2f} s faults {row['minor_faults']:>6} "
            f"switches {row['switches']}",
            flush=True,
        )
        rows.append(row)
    return rows


def section(rows: list[dict[str, Any]], busy: int) -> str:
    lines = [
        "## Process CPU time of one cell: quiet, under load, later in the same process",
        "",
        f"Run: {time.strftime('%Y-%m-%dT%H:%M:%S+00:00', time.gmtime())} by "
        f"`python benchmarks/bench_cpu_inflation.py --busy {busy}`: {ROUNDS} interleaved "
        "rounds per cell (the table's method), quiet, beside busy loops forked from the "
        "benchmark (as bench_overhead_repro.py makes them), beside busy loops started as "
        "fresh interpreters (no shared copy-on-write pages), and quiet again; first with "
        "Python's cyclic GC on during the timed calls (the table's method before), then off "
        "(its method now: `suite.GC_OFF_WHILE_TIMING`).",
        "",
        "| GC | condition | model | tool | CPU-time ratio [IQR] | user s | sys s |"
        " minor faults | involuntary switches |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['gc']} | {r['condition']} | `{r['model']}` | `{r['tool']}` | {r['ratio']:.2f} "
            f"[{r['q1']:.2f}-{r['q3']:.2f}] | {r['user_s']:.2f} | {r['sys_s']:.2f} | "
            f"{r['minor_faults']} | {r['switches']} |"
        )
    return "\n".join(lines) + "\n\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--busy", type=int, default=4)
    parser.add_argument("--doc", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows: list[dict[str, Any]] = []
    for gc_off in (False, True):
        suite.GC_OFF_WHILE_TIMING = gc_off
        rows += measure("quiet")
        with cpu_load(args.busy, 600):
            rows += measure(f"{args.busy} forked busy")
        with spawned_load(args.busy, 600):
            rows += measure(f"{args.busy} spawned busy")
        rows += measure("quiet again")
    text = section(rows, args.busy)
    print(text)
    if args.doc is not None:
        write_section(args.doc, "bench_cpu_inflation", text)


if __name__ == "__main__":
    main()
