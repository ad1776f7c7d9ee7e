"""Does the committed overhead table reproduce under load? The accuracy/overhead part of
`make bench` run again, independently, with N extra busy-loop processes (4 by default) made
by this script, and per cell whether the rerun's median falls within the committed cell's
recorded spread (its IQR over rounds) or 10% of its median, for the process-CPU-time ratio
(what the table shows) and, for reference, the wall-clock one.

It needs the peers the committed run had (benchmarks/.venv, or the same packages on
PYTHONPATH); a cell the rerun cannot measure is counted as missing, not as reproduced.

    benchmarks/.venv/bin/python benchmarks/bench_overhead_repro.py [--busy 4] [--doc PAGE]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import torch
from bench_noise import cpu_load
from doc_sections import write_section
from models import model_set
from suite import REPEATS, THREADS, _psi, host_pressure, run_accuracy

HERE = Path(__file__).resolve().parent
COMMITTED = HERE / "results" / "results.json"
Key = tuple[str, str]


def overhead_cells(data: dict[str, Any]) -> dict[Key, dict[str, Any]]:
    """(model, tool) -> the cell's overhead record, for every cell that has one."""
    return {
        (c["model"], c["tool"]): c["overhead"]
        for c in data["accuracy"]["cells"]
        if c.get("overhead") and c["overhead"].get("ratio", {}).get("median") is not None
    }


def within(first: dict[str, Any], again: float) -> bool:
    """The rerun's median inside the committed cell's IQR, or within 10% of its median."""
    median, q1, q3 = first["median"], first["q1"], first["q3"]
    inside = q1 is not None and q3 is not None and q1 <= again <= q3
    return inside or abs(again - median) <= 0.10 * median


def compare(
    first: dict[Key, dict[str, Any]], second: dict[Key, dict[str, Any]], key: str
) -> dict[str, Any]:
    rows = []
    for cell in sorted(first):
        again = second.get(cell, {}).get(key, {}).get("median")
        ok = again is not None and within(first[cell][key], again)
        rows.append({"cell": list(cell), "first": first[cell][key], "again": again, "ok": ok})
    return {"reproduced": sum(r["ok"] for r in rows), "cells": len(rows), "rows": rows}


def _pressure_text(pressure: dict[str, Any]) -> str:
    share = pressure.get("psi_some_share")
    psi = "n/a" if share is None else f"{share:.0%}"
    return (
        f"load average {pressure['load_average'][0]:.1f} at the end, PSI cpu some {psi} of the run"
    )


def section(committed: dict[str, Any], result: dict[str, Any], busy: int) -> str:
    cpu, wall = result["ratio"], result["wall_ratio"]
    misses = [r for r in cpu["rows"] if not r["ok"]]
    lines = [
        "## Does the overhead table reproduce under load?",
        "",
        f"Run: {result['date']} by `python benchmarks/bench_overhead_repro.py --busy {busy}`: the "
        f"overhead part of `make bench` again, independently, with {busy} busy-loop processes "
        "made by the script, against the committed table above "
        f"(committed run: {_pressure_text(committed.get('accuracy_pressure') or {})}; rerun: "
        f"{_pressure_text(result['pressure'])}; the background load comes from other work "
        "on this shared 2-core machine). A cell reproduces when the rerun's median lies "
        "within the committed IQR or 10% of the committed median.",
        "",
        f"* process CPU time (the table): **{cpu['reproduced']} of {cpu['cells']} cells** "
        "reproduce",
        f"* wall clock (for reference, not tabled): {wall['reproduced']} of {wall['cells']} cells",
    ]
    for row in misses:
        first, again = row["first"], row["again"]
        shown = "not measured" if again is None else f"{again:.3g}"
        lines.append(
            f"  * not reproduced: `{row['cell'][0]}` / `{row['cell'][1]}`: committed "
            f"{first['median']:.3g} [{first['q1'] or first['median']:.3g}-"
            f"{first['q3'] or first['median']:.3g}], rerun {shown}"
        )
    return "\n".join(lines) + "\n\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--busy", type=int, default=4)
    parser.add_argument("--against", type=Path, default=COMMITTED)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "overhead_repro.json")
    parser.add_argument("--doc", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    committed = json.loads(args.against.read_text(encoding="utf-8"))
    first = overhead_cells(committed)
    with cpu_load(args.busy, 3600):
        psi, begun = _psi(), time.perf_counter()
        rerun = run_accuracy(model_set("full"), REPEATS)
        pressure = host_pressure(psi, time.perf_counter() - begun)
    second = {(c["model"], c["tool"]): c["overhead"] for c in rerun["cells"] if c.get("overhead")}
    result = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        "busy": args.busy,
        "pressure": pressure,
        "ratio": compare(first, second, "ratio"),
        "wall_ratio": compare(first, second, "wall_ratio"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, args.out)
    for key in ("ratio", "wall_ratio"):
        print(f"{key}: {result[key]['reproduced']} of {result[key]['cells']} cells reproduce")
    text = section(committed, result, args.busy)
    print(text)
    if args.doc is not None:
        write_section(args.doc, "bench_overhead_repro", text)


if __name__ == "__main__":
    main()
