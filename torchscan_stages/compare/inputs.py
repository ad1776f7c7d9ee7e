"""What the compare command compares: the reports at the given paths, by kind, and the
thresholds checked before anything is read (one line each, for exit status 2)."""

from __future__ import annotations

import math
from pathlib import Path

from ..report import (
    AnalysisReport,
    BenchmarkComparison,
    BenchmarkReport,
    ReportDiff,
    check_output_path,
    load_report,
)
from .benchmarks import compare_benchmarks
from .reports import compare_reports


def threshold_problem(max_slowdown: float | None, min_effect: float | None) -> str | None:
    """The first problem with ``--max-slowdown`` / ``--min-effect``, as one line; None if fine."""
    if max_slowdown is not None and not (math.isfinite(max_slowdown) and max_slowdown >= 1.0):
        return f"--max-slowdown must be a finite ratio >= 1.0 (e.g. 1.05), got {max_slowdown}"
    if min_effect is not None and not (math.isfinite(min_effect) and 0.0 <= min_effect < 1.0):
        return f"--min-effect must be a finite number in [0, 1) (e.g. 0.05), got {min_effect}"
    return None


def compare_paths(
    paths: list[Path], *, min_effect: float | None, max_slowdown: float | None
) -> BenchmarkComparison | ReportDiff:
    """Two analysis reports (diffed), two benchmark reports (compared as saved) or one saved
    comparison (as it is); anything else is a ``ValueError`` naming what was given."""
    reports = [load_report(path) for path in paths]
    if len(reports) == 1 and isinstance(reports[0], BenchmarkComparison):
        if min_effect is not None:
            judged = reports[0].settings.get("min_effect", "unrecorded")
            raise ValueError(
                f"--min-effect {min_effect} cannot rejudge a saved comparison "
                f"({paths[0]} was judged with min_effect={judged}); compare the two "
                "benchmark reports again with --min-effect"
            )
        return reports[0]
    if len(reports) == 2 and all(isinstance(r, AnalysisReport) for r in reports):
        for flag, value in (("--min-effect", min_effect), ("--max-slowdown", max_slowdown)):
            if value is not None:
                raise ValueError(
                    f"{flag} applies to benchmark reports (measured latency); two analysis "
                    "reports are compared count by count, exactly: drop the flag"
                )
        return compare_reports(reports[0], reports[1])  # type: ignore[arg-type]
    if len(reports) == 2 and all(isinstance(r, BenchmarkReport) for r in reports):
        judge = {} if min_effect is None else {"min_effect": min_effect}
        return compare_benchmarks(reports[0], reports[1], judge=judge)  # type: ignore[arg-type]
    kinds = ", ".join(r.kind for r in reports)
    raise ValueError(
        "expected two analysis reports, two benchmark reports or one "
        f"benchmark_comparison, got: {kinds}"
    )


def output_problem(outputs: dict[str, tuple[Path | None, str]], inputs: list[Path]) -> str | None:
    """The first output (``flag -> (path, example)``) that would overwrite an input or is a
    directory, as one line; None when every one is fine (report.check_output_path)."""
    for flag, (path, example) in outputs.items():
        try:
            check_output_path(path, inputs, example=example)
        except ValueError as error:
            return f"{flag}: {error}"
    return None
