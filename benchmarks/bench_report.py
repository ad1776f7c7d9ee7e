"""Save and load a 100,000-record AnalysisReport; bars: each <= 5 s, peak RSS <= 1 GiB.

Run: ``.venv/bin/python benchmarks/bench_report.py [--records 100000] [--rounds 3]
[--render-timeout 180] [--no-before] [--doc docs/benchmarks.md]``.

The report is a real ``crawl_module`` report of a deep model built in code (blocks of
Linear, ReLU and a leaf without a handler, so records carry partial metrics and a diagnostic
each fourth record; full mode, so per-module operator FLOPs too). It is saved in the compact
form (``.json`` and ``.json.gz``) in interleaved rounds, rotating the order; every load runs
in a fresh child process that reports its own load time (wall and CPU) and its peak RSS
(``VmHWM``: the whole child, interpreter and imports included). ``render_report`` is timed
in its own child after a load, with a timeout (a render that does not finish is reported as
"more than" its timeout, never as a number it did not reach). The field-by-field form of
schema_version 1 is saved in every round and loaded once, as the reference ("before").
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from doc_sections import write_section  # benchmarks/doc_sections.py

from torchscan_stages.stats import quartiles

GIB = 1 << 30
BARS = {"save_s": 5.0, "load_s": 5.0, "render_s": 5.0, "peak_bytes": GIB}


def deep_model(records: int) -> Any:
    """About ``records`` module calls: a root plus blocks of four (Sequential, Linear, ReLU,
    a leaf without a handler)."""
    import torch
    from torch import nn

    class Mystery(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 0.5

    blocks = max(1, (records - 1) // 4)
    return nn.Sequential(
        *[nn.Sequential(nn.Linear(16, 16), nn.ReLU(), Mystery()) for _ in range(blocks)]
    )


# ---------------------------------------------------------------------------- child side


def _peak_rss() -> int:
    """This process's peak resident set since its exec (``VmHWM``).

    Not ``getrusage``'s ``ru_maxrss``: Linux carries that across exec, so a child started
    from this big parent would report the parent's peak. The package's one parser of
    ``/proc/self/status`` (measure/rss_phases.py, standard library only) reads it.
    """
    from torchscan_stages.measure.rss_phases import proc_status_bytes

    peak = proc_status_bytes("VmHWM")
    if peak is None:
        raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")
    return peak


def child(mode: str, path: str) -> None:
    """Load (and with ``render``, render) one report; print timings and peak RSS as JSON."""
    from torchscan_stages.report import load_report

    wall, cpu = time.perf_counter(), time.process_time()
    report = load_report(path)
    result: dict[str, Any] = {
        "load_s": time.perf_counter() - wall,
        "load_cpu_s": time.process_time() - cpu,
        "records": len(getattr(report, "layers", [])),
    }
    if mode == "render":
        from torchscan_stages.render import render_report

        wall, cpu = time.perf_counter(), time.process_time()
        page = render_report(report)
        result["render_s"] = time.perf_counter() - wall
        result["render_cpu_s"] = time.process_time() - cpu
        result["page_bytes"] = len(page.encode("utf-8"))
    result["peak_bytes"] = _peak_rss()
    print(json.dumps(result))


def run_child(mode: str, path: Path, timeout: float) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", mode, str(path)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"timed_out": timeout}
    if done.returncode != 0:
        raise RuntimeError(f"child {mode} {path} failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# --------------------------------------------------------------------------- parent side


def _timed(action: Any) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(records: int, rounds: int, render_timeout: float, before: bool) -> dict[str, Any]:
    from torchscan_stages.analysis.crawl import crawl_module
    from torchscan_stages.report import atomic_write_text, save_report

    start = time.perf_counter()
    report = crawl_module(deep_model(records), (16,))
    crawl_s = time.perf_counter() - start
    folder = Path(tempfile.mkdtemp(prefix="bench_report_"))
    paths = {"json": folder / "r.json", "gz": folder / "r.json.gz", "before": folder / "v1.json"}

    def save_before() -> None:  # what save wrote before: field by field, indented, version 1
        text = report.model_dump_json(indent=2).replace(
            '"schema_version": 2', '"schema_version": 1'
        )
        atomic_write_text(paths["before"], text + "\n")

    savers = {
        "json": lambda: save_report(report, paths["json"]),
        "gz": lambda: save_report(report, paths["gz"]),
        "before": save_before,
    }
    if not before:
        del savers["before"]
    saves: dict[str, list[tuple[float, float]]] = {name: [] for name in savers}
    loads: dict[str, list[dict[str, Any]]] = {"json": [], "gz": []}
    for index in range(rounds):
        names = list(savers)
        names = names[index % len(names) :] + names[: index % len(names)]  # rotating order
        for name in names:
            saves[name].append(_timed(savers[name]))
        order = ["json", "gz"] if index % 2 == 0 else ["gz", "json"]
        for name in order:
            loads[name].append(run_child("load", paths[name], timeout=600))
    result: dict[str, Any] = {
        "records": len(report.layers),
        "diagnostics": len(report.diagnostics),
        "crawl_s": crawl_s,
        "rounds": rounds,
        "sizes": {name: path.stat().st_size for name, path in paths.items() if path.exists()},
        "saves": saves,
        "loads": loads,
        "render": run_child("render", paths["gz"], timeout=render_timeout),
        "render_timeout_s": render_timeout,
    }
    if before:
        result["before_load"] = run_child("load", paths["before"], timeout=600)
    for path in paths.values():
        path.unlink(missing_ok=True)
    folder.rmdir()
    return result


# -------------------------------------------------------------------------------- report


def _median_iqr(values: list[float]) -> tuple[float, float]:
    q1, median, q3 = quartiles(values)  # the package's (stats.py), linear
    return median, q3 - q1


def _seconds(values: list[float]) -> str:
    median, iqr = _median_iqr(values)
    return f"{median:.2f} s [{iqr:.2f}]"


def _row(what: str, wall: list[float], cpu: list[float], bar: float) -> str:
    holds = "yes" if _median_iqr(wall)[0] <= bar else "no"
    holds_cpu = "yes" if _median_iqr(cpu)[0] <= bar else "no"
    return (
        f"| {what} | {_seconds(wall)} | {_seconds(cpu)} | <= {bar:.0f} s | "
        f"{holds} (wall) / {holds_cpu} (cpu) |"
    )


def _peak_row(what: str, peaks: list[int]) -> str:
    peak = max(peaks)
    holds = "yes" if peak <= BARS["peak_bytes"] else "no"
    return f"| {what} | {peak / 2**20:,.0f} MiB (max of {len(peaks)}) | | <= 1024 MiB | {holds} |"


def _render_rows(render: dict[str, Any]) -> list[str]:
    if "timed_out" in render:
        limit = render["timed_out"]
        return [f"| render_report after a load (child) | more than {limit:.0f} s | | <= 5 s | no |"]
    return [
        _row(
            "render_report after a load (child)", [render["render_s"]], [render["render_cpu_s"]], 5
        ),
        _peak_row("peak RSS of a child: load + render_report", [render["peak_bytes"]]),
        f"| page size | {render['page_bytes'] / 1e6:.1f} MB | | (HTML bar: <= 15 MB) | "
        f"{'yes' if render['page_bytes'] <= 15e6 else 'no'} |",
    ]


def section(data: dict[str, Any], argv: list[str]) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    sizes, saves, loads = data["sizes"], data["saves"], data["loads"]
    lines = [
        "## Report files: save and load_report of a 100,000-record AnalysisReport",
        "",
        f"Run: {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')} by "
        f"`{' '.join(['python benchmarks/bench_report.py', *argv])}` "
        f"on {platform.machine()}, {os.cpu_count()} logical cores, shared with other work "
        f"(load average {load:.2f} at the end), Python {platform.python_version()}. A real "
        f"`crawl_module` report of a deep model built in code: {data['records']:,} records, "
        f"{data['diagnostics']:,} diagnostics (crawl {data['crawl_s']:.1f} s, untimed). "
        f"{data['rounds']} interleaved rounds in rotating order, median [IQR]; saves in this "
        "process, every load in a fresh child (its own load time and peak RSS, interpreter and "
        "imports included).",
        "",
        f"Sizes: field by field (schema_version 1) {sizes.get('before', 0) / 1e6:,.1f} MB; "
        f"compact `.json` {sizes['json'] / 1e6:,.1f} MB; compact `.json.gz` "
        f"{sizes['gz'] / 1e6:,.2f} MB.",
        "",
        "| what | wall | cpu | bar | holds |",
        "| --- | ---: | ---: | --- | --- |",
        _row("save_report `.json`", *zip(*saves["json"], strict=True), bar=5),  # type: ignore[misc]
        _row("save_report `.json.gz`", *zip(*saves["gz"], strict=True), bar=5),  # type: ignore[misc]
        _row(
            "load_report `.json` (child)",
            [r["load_s"] for r in loads["json"]],
            [r["load_cpu_s"] for r in loads["json"]],
            5,
        ),
        _row(
            "load_report `.json.gz` (child)",
            [r["load_s"] for r in loads["gz"]],
            [r["load_cpu_s"] for r in loads["gz"]],
            5,
        ),
        _peak_row(
            "peak RSS of a child doing load_report",
            [r["peak_bytes"] for r in loads["json"] + loads["gz"]],
        ),
        *_render_rows(data["render"]),
    ]
    if "before" in saves:
        before = data["before_load"]
        after = _median_iqr([r["load_s"] for r in loads["json"]])[0]
        lines += [
            "",
            "Before (field by field, schema_version 1, the same report): save "
            f"{_seconds([w for w, _ in saves['before']])} wall; "
            + (
                f"load_report {before['load_s']:.1f} s wall ({before['load_cpu_s']:.1f} s cpu), "
                f"peak RSS {before['peak_bytes'] / 2**20:,.0f} MiB: load is "
                f"{before['load_s'] / after:.0f}x the compact `.json` median of this run."
                if "load_s" in before
                else f"load_report more than {before['timed_out']:.0f} s."
            ),
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--render-timeout", type=float, default=180.0)
    parser.add_argument("--no-before", action="store_true", help="skip the version-1 reference")
    parser.add_argument("--doc", type=Path, default=None, help="write the section there")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    data = measure(args.records, args.rounds, args.render_timeout, not args.no_before)
    shown = [a for a in argv if not a.startswith("--doc") and a != str(args.doc)]
    text = section(data, shown)
    print(text)
    if args.doc:
        write_section(args.doc, "bench_report", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
