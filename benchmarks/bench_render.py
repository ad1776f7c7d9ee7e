"""Render a 100,000-record AnalysisReport and open the page in headless Chromium.

Run: ``.venv/bin/python benchmarks/bench_render.py [--layers N] [--repeat R] [--opens K]
[--doc docs/benchmarks.md]``. The report is a real ``crawl_module`` report of a deep model
built in code (blocks of Linear, ReLU and a custom leaf without a handler, so partial values
and diagnostics are rendered too); the crawl runs once, untimed, and reaches the rendering
process as a pickle. A fresh child process unpickles it, then times ``repeat`` renders
(the first includes template compilation), with wall and process CPU time, and reports its
peak RSS (``VmHWM``; see CHILD). Chromium (headless, offline) then opens the page ``opens``
times; the page's script writes ``performance.now()`` into the DOM once the tree's first
rows are built (``data-built-ms``) and after the next frame (``data-painted-ms``), and the
whole browser process (start to DOM dump) is timed too.

Bars: render <= 5 s, peak RSS <= 1 GiB, page <= 15 MB, open in Chromium < 3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from doc_sections import write_section  # benchmarks/doc_sections.py
from torch import nn

BARS = {"render_s": 5.0, "peak_rss_mib": 1024.0, "page_mb": 15.0, "open_s": 3.0}
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--proxy-server=127.0.0.1:9",  # nothing listens there: the page must not need a network
]


class Mystery(nn.Module):
    """A leaf that computes without a handler: its metrics are unavailable (diagnosed)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.5


def deep_model(layers: int) -> nn.Module:
    """About ``layers`` module calls: a root plus blocks of four records each."""
    blocks = max(1, (layers - 1) // 4)
    return nn.Sequential(
        *[nn.Sequential(nn.Linear(16, 16), nn.ReLU(), Mystery()) for _ in range(blocks)]
    )


def crawled_report(layers: int) -> Any:
    from torchscan_stages.analysis.crawl import crawl_module

    return crawl_module(deep_model(layers), (16,))


# The rendering process: it imports only the package's renderer (not torch, which the
# crawl needs), unpickles the report and times ``repeat`` renders; one JSON line out. Its
# peak is VmHWM, this process image's own high-water mark: Linux carries ru_maxrss over
# fork and exec, so getrusage in a child reports at least the parent's RSS at the fork
# (here: torch and the crawled report, about 1.1 GiB).
CHILD = """
import json, pickle, resource, sys, time
from torchscan_stages.measure.rss_phases import proc_status_bytes
from torchscan_stages.render import render_report

def hwm():
    return proc_status_bytes("VmHWM") / 2**20  # bytes -> MiB

report_pickle, page, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(report_pickle, "rb") as handle:
    report = pickle.load(handle)
before = hwm()
walls, cpus = [], []
for _ in range(repeat):
    wall, cpu = time.perf_counter(), time.process_time()
    render_report(report, page)
    walls.append(time.perf_counter() - wall)
    cpus.append(time.process_time() - cpu)
inherited = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"wall": walls, "cpu": cpus, "rss_before_mib": before, "peak": hwm(),
                  "ru_maxrss_mib": inherited}))
"""


def render_in_child(report: Any, work: Path, repeat: int) -> dict[str, Any]:
    """Render in a fresh process; its peak RSS holds the report and the rendering only."""
    pickled = work / "report.pkl"
    with pickled.open("wb") as handle:
        pickle.dump(report, handle, protocol=pickle.HIGHEST_PROTOCOL)
    page = work / "page.html"
    command = [sys.executable, "-c", CHILD, str(pickled), str(page), str(repeat)]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=900)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["page"] = page
    result["bytes"] = page.stat().st_size
    return result


def open_in_chromium(chromium: str, page: Path, work: Path) -> dict[str, float]:
    """One headless load: in-page ms to the built tree and to the next frame, process wall."""
    command = [
        chromium,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={work / 'profile'}",
        "--dump-dom",
        page.resolve().as_uri(),
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=300)
    wall = time.perf_counter() - start
    found = {
        key: float(value)
        for key, value in re.findall(r'data-(built|painted)-ms="([\d.]+)"', done.stdout)
    }
    if "built" not in found:
        raise RuntimeError("the page's tree script did not run (no data-built-ms in the DOM)")
    return {
        "built_ms": found["built"],
        "painted_ms": found.get("painted", float("nan")),
        "wall": wall,
    }


Row = tuple[str, str, str, bool]


def rows_of(layers: int, rendered: dict[str, Any], opens: list[dict[str, float]]) -> list[Row]:
    """(what, measured, bar, holds) per bar."""
    render_s = max(rendered["wall"])
    page_mb = rendered["bytes"] / 1e6
    built = statistics.median([o["built_ms"] for o in opens]) / 1000
    painted = [o["painted_ms"] for o in opens if o["painted_ms"] == o["painted_ms"]]
    open_s = statistics.median(painted) / 1000 if painted else built
    wall = statistics.median([o["wall"] for o in opens])
    return [
        (
            f"render_report, {layers:,} records (slowest of {len(rendered['wall'])}, wall)",
            f"{render_s:.2f} s (cpu {max(rendered['cpu']):.2f} s; runs "
            + ", ".join(f"{w:.2f}" for w in rendered["wall"])
            + ")",
            f"<= {BARS['render_s']:g} s",
            render_s <= BARS["render_s"],
        ),
        (
            "peak RSS of the rendering process",
            f"{rendered['peak']:.0f} MiB (VmHWM; {rendered['rss_before_mib']:.0f} MiB once the "
            "report was unpickled, before rendering; getrusage says "
            f"{rendered['ru_maxrss_mib']:.0f} MiB, the parent's RSS at the fork included)",
            f"<= {BARS['peak_rss_mib']:g} MiB",
            rendered["peak"] <= BARS["peak_rss_mib"],
        ),
        (
            "page size",
            f"{page_mb:.2f} MB",
            f"<= {BARS['page_mb']:g} MB",
            page_mb <= BARS["page_mb"],
        ),
        (
            f"Chromium: navigation to tree painted (median of {len(opens)})",
            f"{open_s:.2f} s (tree built {built:.2f} s; whole browser run {wall:.2f} s)",
            f"< {BARS['open_s']:g} s",
            open_s < BARS["open_s"],
        ),
    ]


def section(rows: list[Row], argv: list[str]) -> str:
    load = os.getloadavg()[0]
    lines = [
        "## A 100,000-record report: render, memory, page size, opening in Chromium",
        "",
        f"Run: {datetime.now(UTC).isoformat(timespec='seconds')} by "
        f"`python benchmarks/bench_render.py {' '.join(argv)}` on {platform.machine()}, "
        f"{os.cpu_count()} logical cores, shared with other work (load average {load:.2f} at "
        f"the end), torch {torch.__version__}. The report is a real `crawl_module` report of "
        "`deep_model` (untimed); a fresh process renders it; Chromium headless, offline.",
        "",
        "| what | measured | bar | holds |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| {what} | {got} | {bar} | {'yes' if ok else 'no'} |" for what, got, bar, ok in rows
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--opens", type=int, default=3)
    parser.add_argument("--doc", type=Path, default=None)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    report = crawled_report(args.layers)
    with tempfile.TemporaryDirectory(prefix="bench_render-") as scratch:
        work = Path(scratch)
        rendered = render_in_child(report, work, args.repeat)
        opens = [open_in_chromium(chromium, rendered["page"], work) for _ in range(args.opens)]
    rows = rows_of(len(report.layers), rendered, opens)
    for what, got, bar, ok in rows:
        print(f"{what}: {got}; bar {bar}: {'yes' if ok else 'NO'}")
    if args.doc is not None:
        write_section(args.doc, "bench_render", section(rows, sys.argv[1:]))


if __name__ == "__main__":
    main()
