"""Stage ``rss``: peak resident set size of a fresh child that rebuilds the same workload.

Measures: the process-level peak RSS of a new Python process that imports, builds the same
model and inputs and runs one call, with a peak per phase. Writes: reports/rss.json
(BenchmarkReport) and metrics/rss.json. The child reads the validated config from a
temporary JSON file (any size), never from its command line.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: its relative imports cannot work
    sys.exit(
        "torchscan_stages/stages/rss.py is part of a package; run it as a module: "
        "python -m torchscan_stages.stages.rss"
    )

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..pipeline.feedback import figure
from ..pipeline.runner import (
    WORKLOAD_KEYS,
    StageContext,
    budget_outcome,
    complete_value,
    record_execution,
    stage_main,
)

WRITES = ("reports/rss.json", "metrics/rss.json", "metrics/rss.evidence.json")
KEYS = (*WORKLOAD_KEYS, "rss", "budgets")


def child_command(config_file: Path, execution_file: Path | None = None) -> list[str]:
    """The child's command line: the validated config travels in a file, nothing is re-read.

    A file, not an argument: a large config (long kwargs, a big custom mapping) would pass
    the kernel's argument-size limit ("Argument list too long"). ``execution_file`` is where
    the child writes the thread settings it applied.
    """
    command = [
        sys.executable,
        "-m",
        "torchscan_stages.pipeline.rss_child",
        "--config-file",
        str(config_file),
    ]
    if execution_file is not None:
        command += ["--execution-file", str(execution_file)]
    return command


def child_execution(report: Any, path: Path) -> None:
    """Record the measured child's applied threads and grad mode, not this process's."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        update = {key: record[key] for key in ("num_threads", "num_interop_threads")}
        grad = record["grad_enabled"]
        if not all(type(v) is int and v >= 1 for v in update.values()) or type(grad) is not bool:
            raise ValueError(record)
    except (OSError, ValueError, KeyError, TypeError):
        from ..report import Diagnostic

        report.diagnostics.append(
            Diagnostic(
                code="child_execution_unknown",
                severity="warning",
                metric="execution",
                message="the rss child did not report the thread settings it applied (it "
                "failed before building the workload?); execution.num_threads is this "
                "process's, not the measured child's",
            )
        )
        return
    report.execution = report.execution.model_copy(update={**update, "grad_enabled": grad})


@contextlib.contextmanager
def config_file(ctx: StageContext) -> Iterator[Path]:
    """The validated config as a temporary JSON file, removed when the child is done."""
    config = ctx.config.model_dump(mode="json", by_alias=True)
    fd, name = tempfile.mkstemp(prefix="torchscan_stages-rss-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(config, handle, sort_keys=True)
        yield Path(name)
    finally:
        os.unlink(name)


def run(ctx: StageContext) -> None:
    from ..measure.rss import measure_peak_rss
    from ..pipeline.workload import configured_device, workload_name

    configured_device(ctx.config.device)  # an absent device fails here, before the child runs
    name = workload_name(ctx.config)
    with config_file(ctx) as path:
        execution = path.with_name(path.stem + ".execution.json")
        try:
            command = child_command(path, execution)
            with ctx.timed():  # the child's imports and build are part of what it measures
                report = measure_peak_rss(command, timeout=ctx.config.rss.timeout, name=name)
            child_execution(report, execution)
        finally:
            execution.unlink(missing_ok=True)
    record_execution(report, ctx.config.precision, ctx.config, threads=True)
    metrics: dict[str, Any] = {}
    evidence: dict[str, Any] = {}
    section = report.rss
    if section is not None:
        from ..pipeline.evidence import evidence_of, warning_codes

        metrics["peak_rss_bytes"] = complete_value(section.peak)
        peak = evidence_of(section.peak, warning_codes(report.diagnostics, ("rss.peak",)))
        evidence["peak_rss_bytes"] = evidence["peak_rss_bytes_within_budget"] = peak
        phase_codes = warning_codes(report.diagnostics, ("rss.phases",))
        for phase in section.phases:
            key = f"phase_{phase.name}_peak_rss_bytes"
            metrics[key] = complete_value(phase.peak_rss)
            evidence[key] = evidence_of(phase.peak_rss, phase_codes)
        report.diagnostics.extend(
            budget_outcome(
                metrics, "peak_rss_bytes", section.peak, ctx.config.budgets.peak_rss_bytes
            )
        )
        ctx.headline = [figure("peak RSS", section.peak)]
        ctx.headline += [figure(f"{phase.name} phase", phase.peak_rss) for phase in section.phases]
    ctx.write_report(report)
    ctx.write_metrics(metrics, evidence=evidence)


if __name__ == "__main__":
    stage_main("rss", KEYS, run, about=__doc__ or "", writes=WRITES)
