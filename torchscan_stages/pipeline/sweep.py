"""Sweep summaries over exactly the jobs of one sweep, failed jobs included.

A Hydra multirun (``-m precision=fp32,bf16 threads=1,2``) writes each job's report under
its own job folder. :class:`SweepSummaryCallback` (registered in ``conf/config.yaml``)
writes ``job_status.json`` in every job folder when that job ends (completed or failed,
with its error line; it runs wherever the launcher ran the job), and, when the sweep ends,
``sweep_summary.json`` (a table; also DVC plots data) and ``sweep_summary.html`` (table and
charts) in the sweep folder. A sweep with a failed job still gets its summary: Hydra raises
after the batch, so the summary is also written at interpreter exit. Jobs already in that
folder before the sweep started are not part of it. ``python -m
torchscan_stages.pipeline.sweep`` summarises any set of job folders (a DVC ``matrix:``
pipeline, or the workspaces of DVC experiments) the same way.

Timing jobs that share one host disturb each other (CPU, caches, memory bandwidth): timing
stages take a host lock (see ``hostlock``) and record how many timing jobs shared the host.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..report.evidence import SIDECAR_SUFFIX
from ..report.sweep import JobStatus, SweepJob, SweepSummary
from .job_status import JOB_STATUS, record_sweep_failures, recorded_failure, write_job_status

NOTE = (
    "Timing jobs that share one host disturb each other; a sweep run in parallel "
    "(joblib, several queue workers) measures contention as well as the configuration."
)
SUMMARY_JSON = "sweep_summary.json"
SUMMARY_HTML = "sweep_summary.html"
_METRIC_KEYS = {"status", "unit", "scope", "method"}
_CONFIG_AXES = ("model", "input", "device", "precision", "threads", "seed")
_SKIP = {"layers", "provenance", "diagnostics", "operators", "events"}
_Row = tuple[SweepJob, list[Any]]  # a job's row and (report path, HostState) of its timings


def metric_results(document: Any, prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every MetricResult in a report, by dotted path (per-layer records left out)."""
    if isinstance(document, dict):
        if document.keys() >= _METRIC_KEYS:
            yield prefix, document
            return
        for key, value in document.items():
            if key not in _SKIP:
                yield from metric_results(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            name = value.get("scope") if isinstance(value, dict) else None
            yield from metric_results(value, f"{prefix}.{name or index}")


def _report_metrics(stem: str, document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path, result in metric_results(document):
        name = path if path.startswith(f"{stem}.") else f"{stem}.{path}"
        found[name] = {
            k: result.get(k) for k in ("status", "value", "known_value", "unit", "scope")
        }
    stats = (document.get("latency") or {}).get("stats")
    warmed = found.get("latency.warmed" if stem == "latency" else f"{stem}.latency.warmed")
    if isinstance(stats, dict) and warmed is not None:
        warmed["spread"] = {k: stats.get(k) for k in ("q1", "q3", "iqr", "blocks")}
    return found


def _mark_caveats(metrics: dict[str, dict[str, Any]], stem: str, report: Any) -> None:
    """The warnings a latency's figure rests on (render.caveats), kept beside its numbers."""
    from ..render.caveats import latency_caveats
    from ..report import BenchmarkReport

    if not isinstance(report, BenchmarkReport) or report.latency is None:
        return
    caveats = latency_caveats(report)
    prefix = "latency" if stem == "latency" else f"{stem}.latency"
    for name in ("warmed", "throughput"):
        entry = metrics.get(f"{prefix}.{name}")
        if entry is not None and caveats:
            entry["caveats"] = caveats


def _axes(overrides: list[str]) -> dict[str, str]:
    """The swept settings of a job: its task overrides, Hydra's own settings left out."""
    axes: dict[str, str] = {}
    for item in overrides:
        key, sep, value = str(item).partition("=")
        if sep and not key.lstrip("+~").startswith("hydra"):
            axes[key.lstrip("+~")] = value
    return axes


def _provenance(document: dict[str, Any]) -> dict[str, Any]:
    provenance = document.get("provenance") or {}
    run = provenance.get("run") or {}
    return {
        "env_hash": provenance.get("env_hash"),
        "torch_version": provenance.get("torch_version"),
        "git_commit": run.get("git_commit"),
        "git_dirty": run.get("git_dirty"),
    }


def _read_json(path: Path, problems: list[str]) -> Any:
    """A job file's JSON; a malformed one becomes a problem of this job's row, never a crash."""
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        problems.append(f"{path.parent.name}/{path.name}: unreadable ({type(error).__name__}: "
                        f"{' '.join(str(error).split())[:200]})")  # fmt: skip
        return None


def _object(value: Any, path: Path, problems: list[str]) -> dict[str, Any]:
    """``value`` when it is a JSON object (or absent); anything else is this job's problem."""
    if value is None or isinstance(value, dict):
        return value or {}
    problems.append(f"{path.parent.name}/{path.name}: expected a JSON object, got "
                    f"{type(value).__name__}")  # fmt: skip
    return {}


def _report_files(job_dir: Path) -> list[Path]:
    """A job's reports in either format (``NAME.json`` or compact ``NAME.json.gz``)."""
    folder = job_dir / "reports"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz")))


def _stem(path: Path) -> str:
    return path.name.removesuffix(".gz").removesuffix(".json")


def _job_status(path: Path, problems: list[str]) -> JobStatus | None:
    """A job's ``job_status`` report; a damaged one is a problem of this job's row."""
    from ..report import load_report

    if not path.exists():
        return None
    try:
        found = load_report(path)
    except ValueError as error:
        problems.append(str(error))
        return None
    if not isinstance(found, JobStatus):
        problems.append(f"{path}: a {found.kind} report, not a job_status")
        return None
    return found


def _job_row(job_dir: Path, root: Path, *, listed: bool = False) -> _Row | None:
    """One job's row and its timed reports' host states; ``listed`` (named by the user)
    folders always get one. A damaged file of the job (status, metrics, overrides, a
    report) fails this row only, naming it."""
    problems: list[str] = []
    reports = _report_files(job_dir)
    status_path = job_dir / JOB_STATUS
    status_doc = _job_status(status_path, problems)
    if not (listed or reports or status_path.exists() or (job_dir / ".hydra").is_dir()):
        return None  # not a job folder (a sweep folder also holds .submitit/ and others)
    try:
        name = job_dir.relative_to(root).as_posix()
    except ValueError:  # a job folder outside the summary's folder
        name = job_dir.as_posix()
    row: dict[str, Any] = {"job": name}
    overrides = _read_overrides(job_dir / ".hydra" / "overrides.yaml", problems)
    if overrides is not None:
        row["overrides"] = overrides
        row["axes"] = _axes(overrides)
    if status_doc is not None:
        row.update(
            status_doc.model_dump(include={"status", "error", "host", "timing_jobs_on_host"})
        )
    else:
        row["status"] = "completed" if reports else "unknown"
    if row["status"] == "unknown" and not problems:
        row["error"] = "no report and no job_status.json: the job never finished"
    for metrics_file in sorted((job_dir / "metrics").glob("*.json")):
        if metrics_file.name.endswith(SIDECAR_SUFFIX):  # the evidence beside the metrics
            continue
        metrics = _object(_read_json(metrics_file, problems), metrics_file, problems)
        for key, value in metrics.items():
            if value is not None and (type(value) not in (int, float) or value != value):
                problems.append(f"metrics/{metrics_file.name}: {key!r} is not a number")
                continue
            # '_', not '.': a dot in a field name means a nested field to vega-lite (dvc plots)
            row[f"{metrics_file.stem}_{key}"] = value
    hosts = _report_columns(row, name, reports, problems)
    if problems:  # this job's files are damaged: its row says so, the others are untouched
        row["status"] = "failed"
        row["error"] = "; ".join(([row["error"]] if row.get("error") else []) + problems)
    return _validated(row), hosts


def _validated(row: dict[str, Any]) -> SweepJob:
    """The row as a SweepJob; a value no report or status could hold fails this row only."""
    try:
        return SweepJob.model_validate(row)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        return SweepJob(job=row["job"], status="failed", error=f"{where}: {first['msg']}")


def _report_columns(
    row: dict[str, Any], name: str, reports: list[Path], problems: list[str]
) -> list[Any]:
    """The job's metrics, provenance and config columns from its reports, each loaded once;
    returns (report path, HostState) of its timed reports."""
    from ..report import load_report

    row["metrics"] = {}
    hosts: list[Any] = []
    for report_file in reports:
        try:
            report = load_report(report_file)  # once per file, validated, in whatever format
        except ValueError as error:  # one unreadable report: this job's error, not a crash
            problems.append(str(error))
            continue
        # per-layer records and diagnostics are skipped by metric_results (_SKIP) anyway:
        # not dumping them spares a copy of every record of a large analysis report
        document = report.model_dump(mode="json", exclude={"layers", "diagnostics"})
        row["metrics"].update(_report_metrics(_stem(report_file), document))
        _mark_caveats(row["metrics"], _stem(report_file), report)
        row.setdefault("provenance", _provenance(document))
        _config_columns(row, (document.get("provenance") or {}).get("run") or {})
        if report.provenance.host is not None:
            hosts.append((f"{name}/reports/{report_file.name}", report.provenance.host))
    row["reports"] = [f"{name}/reports/{p.name}" for p in reports]
    if "axes" not in row:  # no Hydra overrides saved (a DVC matrix job): its config says
        row["axes"] = {k: str(row[k]) for k in _CONFIG_AXES if k in row}
    return hosts


def _read_overrides(path: Path, problems: list[str]) -> list[str] | None:
    """A job's ``.hydra/overrides.yaml`` (a YAML list of strings); ``None`` when it has none
    or it is damaged (then a problem of this job's row)."""
    if not path.exists():
        return None
    import yaml

    try:
        value = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        first = " ".join(str(error).split())[:200]
        problems.append(f".hydra/overrides.yaml: unreadable ({type(error).__name__}: {first})")
        return None
    if not isinstance(value, list):
        problems.append(f".hydra/overrides.yaml: expected a YAML list, got {type(value).__name__}")
        return None
    return [str(item) for item in value]


def _config_columns(row: dict[str, Any], run: dict[str, Any]) -> None:
    config = run.get("config") or {}
    for key in ("threads", "seed"):
        if key in config:
            row.setdefault(key, config[key])
    for key in ("precision", "model", "input", "device"):
        section = config.get(key)
        if isinstance(section, dict):
            row.setdefault(key, section.get("name", section.get("type")))


def write_summary(
    rows: list[SweepJob], output_dir: Path, title: str, timings: Iterable[Any] = ()
) -> SweepSummary:
    """The sweep's table (a ``sweep_summary`` report, also DVC plots data) and its offline
    HTML page. ``timings``: (report path, HostState) of the jobs' timed reports."""
    from ..measure.host import overlapping_timings
    from ..provenance import build_provenance, git_state
    from ..render.sweep_view import sweep_page
    from ..report import RunContext, atomic_write_text, save_report

    output_dir = Path(output_dir)
    commit, dirty = git_state()
    run = RunContext(stage="sweep_summary", git_commit=commit, git_dirty=dirty)
    summary = SweepSummary(
        provenance=build_provenance(run, include_runtime=False),
        title=title,
        note=NOTE,
        jobs=rows,
        overlapping_timings=list(overlapping_timings(list(timings))),
    )
    if summary.overlapping_timings:  # measured on one host at once: each disturbed the other
        summary.warning = (
            f"{len(summary.overlapping_timings)} pair(s) of timing jobs overlapped on one "
            "host; their latencies include each other's load"
        )
    save_report(summary, output_dir / SUMMARY_JSON)
    atomic_write_text(output_dir / SUMMARY_HTML, sweep_page(summary))
    return summary


def summarize_jobs(
    job_dirs: Iterable[Path], output_dir: Path, *, title: str = "Sweep", listed: bool = False
) -> SweepSummary:
    """Write the sweep's table (a ``sweep_summary`` report) and its HTML page; returns it.

    ``listed``: the folders were named one by one, so each gets a row even when it holds
    nothing (status ``unknown``), never silently dropped.
    """
    output_dir = Path(output_dir)
    found = [
        row
        for d in sorted(job_dirs)
        if (row := _job_row(Path(d), output_dir, listed=listed)) is not None
    ]
    found.sort(key=lambda row: (len(row[0].job), row[0].job))
    timings = [timing for _, hosts in found for timing in hosts]
    return write_summary([job for job, _ in found], output_dir, title, timings)


def failure_block(summary: SweepSummary) -> list[str]:
    """One line per failed job with its one-line error; nothing when every job completed."""
    failed = summary.failed
    if not failed:
        return []
    lines = [f"{len(failed)} failed job(s):"]
    for row in failed:
        axes = " ".join(f"{k}={v}" for k, v in sorted(row.axes.items()))
        where = f" ({axes})" if axes else ""
        lines.append(f"  job {row.job}{where}: {row.error or row.status}")
    return lines


class SweepSummaryCallback:
    """Hydra callback: each job's outcome; the summary of the jobs this multirun created."""

    def __init__(self) -> None:
        self._before: set[str] = set()
        self._folder: Path | None = None

    @staticmethod
    def _sweep_dir(config: Any) -> Path:
        return Path(str(config.hydra.sweep.dir))

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        folder = self._sweep_dir(config)
        self._before = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
        self._folder = folder
        # Hydra raises after a batch with a failed job and never calls on_multirun_end.
        atexit.register(self._summarise)

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        self._summarise()

    def _summarise(self) -> None:
        folder, self._folder = self._folder, None
        if folder is None or not folder.is_dir():
            return
        jobs = [p for p in folder.iterdir() if p.is_dir() and p.name not in self._before]
        summary = summarize_jobs(jobs, folder, title=f"Sweep {folder}")
        failed = len(summary.failed)
        counted = f"{len(summary.jobs)} jobs" + (f", {failed} failed" if failed else "")
        record_sweep_failures(failed)
        lines = [f"sweep summary: {folder / SUMMARY_HTML} ({counted})", *failure_block(summary)]
        print("\n".join(lines), flush=True)

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        from hydra.core.utils import JobStatus
        from hydra.types import RunMode

        with contextlib.suppress(Exception):  # a single run (hand or DVC matrix): no file
            if config.hydra.mode != RunMode.MULTIRUN:
                return
        output_dir = getattr(job_return, "working_dir", None)
        with contextlib.suppress(Exception):  # a config without runtime keeps working_dir
            output_dir = str(config.hydra.runtime.output_dir)
        if output_dir is None:
            return
        failed = job_return.status == JobStatus.FAILED
        error = job_return._return_value if failed else None
        if not failed and recorded_failure(Path(output_dir)):
            return  # the stage caught its own failure and recorded it (runner._job_failed)
        write_job_status(Path(output_dir), "failed" if failed else "completed", error)

    # Hydra calls these on every callback; a summary has nothing to do there.
    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        return None

    def on_run_end(self, config: Any, **kwargs: Any) -> None:
        return None

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchscan_stages.pipeline.sweep")
    parser.add_argument("output_dir", help="folder that holds the job folders")
    parser.add_argument("jobs", nargs="*", help="job folders (each with reports/)")
    parser.add_argument("--title", default="Sweep")
    parser.add_argument(
        "--dvc-experiments", metavar="REPO", help="summarise the DVC experiments of REPO instead"
    )
    args = parser.parse_args(argv)
    output = Path(args.output_dir)
    if not args.dvc_experiments and not args.jobs:
        parser.error("name job folders, or --dvc-experiments REPO")
    try:  # the summary goes into it: a file there (or above it) is refused in one line
        output.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        why = "a file is there" if output.exists() else error.strerror or str(error)
        print(f"sweep: output_dir {output} is not a folder ({why})", file=sys.stderr)
        return 2
    if args.dvc_experiments:
        from .sweep_dvc import dvc_experiment_rows

        rows = dvc_experiment_rows(Path(args.dvc_experiments))
        summary = write_summary(rows, output, args.title)
    elif args.jobs:
        jobs = [Path(j) for j in args.jobs]
        summary = summarize_jobs(jobs, output, title=args.title, listed=True)
    failed = len(summary.failed)
    print(f"sweep summary: {output / SUMMARY_HTML} ({len(summary.jobs)} jobs, {failed} failed)")
    for line in failure_block(summary):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
