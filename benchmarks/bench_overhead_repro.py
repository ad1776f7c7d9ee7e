"""Does the overhead table reproduce under load? The same cells twice: once on the host as
it is, once with 4 extra busy-loop processes, and per cell whether the second median falls
within the first's recorded spread (IQR) or 10%, for the process-CPU-time ratio (what
`make bench` now tables) and the wall-clock ratio (what it tabled before).

Only the tools installed in the running environment are measured (this project's, torch's
FlopCounterMode and the two floors without the benchmark venv; all peers inside it).

    .venv/bin/python benchmarks/bench_overhead_repro.py [--repeats 5] [--busy 4]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from typing import Any

import psutil
import torch
from bench_noise import cpu_load
from models import model_set
from peers import PEERS
from suite import THREADS, _psi, host_pressure, measure_cell


def _cells(repeats: int) -> dict[tuple[str, str], dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    peers = [p for p in PEERS if not p.package or importlib.util.find_spec(p.package)]
    for bm in model_set("full")[:8]:
        x, bad = bm.make_input(), bm.make_bad_input()
        for peer in peers:
            cell = measure_cell(bm, peer, x, bad, repeats)
            if "overhead" in cell:
                found[(bm.name, peer.name)] = cell["overhead"]
    return found


def _within(first: dict[str, Any], second: dict[str, Any]) -> bool:
    median, q1, q3 = first["median"], first["q1"], first["q3"]
    again = second["median"]
    inside = q1 is not None and q3 is not None and q1 <= again <= q3
    return inside or abs(again - median) <= 0.10 * median


def _pass(label: str, repeats: int) -> dict[tuple[str, str], dict[str, Any]]:
    psi, begun = _psi(), time.perf_counter()
    cells = _cells(repeats)
    pressure = host_pressure(psi, time.perf_counter() - begun)
    share = pressure["psi_some_share"]
    print(
        f"[{label}] {len(cells)} cells in {time.perf_counter() - begun:.0f} s, load "
        f"{pressure['load_average'][0]:.1f}, PSI some {share:.0%} of the pass"
        if share is not None
        else f"[{label}] {len(cells)} cells, load {pressure['load_average'][0]:.1f}",
        flush=True,
    )
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--busy", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    print(f"{psutil.cpu_count()} logical CPUs, load {psutil.getloadavg()[0]:.1f}", flush=True)
    first = _pass("as the host is", args.repeats)
    with cpu_load(args.busy, 3600):
        second = _pass(f"with {args.busy} busy processes", args.repeats)
    shared = sorted(set(first) & set(second))
    for key in ("ratio", "wall_ratio"):
        same = [k for k in shared if _within(first[k][key], second[k][key])]
        print(f"{key}: {len(same)} of {len(shared)} cells reproduce within the IQR or 10%")
        for k in shared:
            a, b = first[k][key]["median"], second[k][key]["median"]
            mark = "" if k in same else "  <- not reproduced"
            print(f"  {k[0]:<18} {k[1]:<28} {a:8.3f} -> {b:8.3f}{mark}")


if __name__ == "__main__":
    main()
