"""Sweep summaries over exactly the jobs of one sweep.

A Hydra multirun (``-m precision=fp32,bf16 threads=1,2``) writes each job's report under
its own job folder; :class:`SweepSummaryCallback` (registered in ``conf/config.yaml``)
writes ``sweep_summary.json`` (a table; also DVC plots data) and ``sweep_summary.html``
(table and chart) in the sweep folder when the sweep ends. Jobs already in that folder
before the sweep started are not part of it. ``python -m torchscan_stages.pipeline.sweep``
summarises job folders of a DVC ``matrix:`` pipeline the same way.

Timing jobs that share one host disturb each other (CPU, caches, memory bandwidth): run
timing sweeps one job at a time (the default launcher) and read parallel sweeps with care.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

NOTE = (
    "Timing jobs that share one host disturb each other; a sweep run in parallel "
    "(joblib, several queue workers) measures contention as well as the configuration."
)
SUMMARY_JSON = "sweep_summary.json"
SUMMARY_HTML = "sweep_summary.html"


def _job_row(job_dir: Path, root: Path) -> dict[str, Any] | None:
    reports = sorted((job_dir / "reports").glob("*.json"))
    if not reports:
        return None
    row: dict[str, Any] = {"job": job_dir.relative_to(root).as_posix()}
    overrides_file = job_dir / ".hydra" / "overrides.yaml"
    if overrides_file.exists():
        import yaml

        row["overrides"] = yaml.safe_load(overrides_file.read_text(encoding="utf-8")) or []
    for metrics_file in sorted((job_dir / "metrics").glob("*.json")):
        values = json.loads(metrics_file.read_text(encoding="utf-8"))
        for key, value in values.items():
            # '_', not '.': a dot in a field name means a nested field to vega-lite (dvc plots)
            row[f"{metrics_file.stem}_{key}"] = value
    for report_file in reports:
        document = json.loads(report_file.read_text(encoding="utf-8"))
        run = (document.get("provenance") or {}).get("run") or {}
        config = run.get("config") or {}
        for key in ("threads", "seed"):
            if key in config:
                row.setdefault(key, config[key])
        for key in ("precision", "model", "input", "device"):
            section = config.get(key)
            if isinstance(section, dict):
                row.setdefault(key, section.get("name", section.get("type")))
    row["reports"] = [p.relative_to(root).as_posix() for p in reports]
    return row


def summarize_jobs(
    job_dirs: Iterable[Path], output_dir: Path, *, title: str = "Sweep"
) -> dict[str, Any]:
    """Write the sweep's table (JSON) and its HTML page; returns the table."""
    from ..report import atomic_write_text

    output_dir = Path(output_dir)
    rows = [row for d in sorted(job_dirs) if (row := _job_row(Path(d), output_dir)) is not None]
    summary: dict[str, Any] = {"title": title, "note": NOTE, "jobs": rows}
    overlaps = _overlapping_timings(rows, output_dir)
    if overlaps:  # measured on one host at the same time: each disturbed the other
        summary["overlapping_timings"] = overlaps
        summary["warning"] = (
            f"{len(overlaps)} pair(s) of timing jobs overlapped on one host; their latencies "
            "include each other's load"
        )
        title = f"{title} - WARNING: {summary['warning']}"
    atomic_write_text(output_dir / SUMMARY_JSON, json.dumps(summary, indent=2) + "\n")
    report_paths = [output_dir / path for row in rows for path in row["reports"]]
    if report_paths:
        from ..render import render_index

        render_index(report_paths, output_dir / SUMMARY_HTML, title=f"{title} ({NOTE})")
    return summary


def _overlapping_timings(rows: list[dict[str, Any]], root: Path) -> list[list[str]]:
    """Report pairs whose timings overlapped on one host (from provenance.host)."""
    from ..measure.host import overlapping_timings
    from ..report import HostState

    timings = []
    for row in rows:
        for path in row["reports"]:
            document = json.loads((root / path).read_text(encoding="utf-8"))
            host = (document.get("provenance") or {}).get("host")
            if host:
                timings.append((path, HostState.model_validate(host)))
    return [list(pair) for pair in overlapping_timings(timings)]


class SweepSummaryCallback:
    """Hydra callback: summarise the jobs this multirun created, and only those."""

    def __init__(self) -> None:
        self._before: set[str] = set()

    @staticmethod
    def _sweep_dir(config: Any) -> Path:
        return Path(str(config.hydra.sweep.dir))

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        folder = self._sweep_dir(config)
        self._before = {p.name for p in folder.iterdir()} if folder.is_dir() else set()

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        folder = self._sweep_dir(config)
        if not folder.is_dir():
            return
        jobs = [p for p in folder.iterdir() if p.is_dir() and p.name not in self._before]
        summary = summarize_jobs(jobs, folder, title=f"Sweep {folder}")
        page = folder / SUMMARY_HTML
        shown = page if page.exists() else folder / SUMMARY_JSON
        print(f"sweep summary: {shown} ({len(summary['jobs'])} jobs)", flush=True)

    # Hydra calls these on every callback; a summary has nothing to do there.
    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        return None

    def on_run_end(self, config: Any, **kwargs: Any) -> None:
        return None

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        return None

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchscan_stages.pipeline.sweep")
    parser.add_argument("output_dir", help="folder that holds the job folders")
    parser.add_argument("jobs", nargs="+", help="job folders (each with reports/)")
    parser.add_argument("--title", default="Sweep")
    args = parser.parse_args(argv)
    output = Path(args.output_dir)
    summary = summarize_jobs([Path(j) for j in args.jobs], output, title=args.title)
    print(f"sweep summary: {output / SUMMARY_HTML} ({len(summary['jobs'])} jobs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
