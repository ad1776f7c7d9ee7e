"""What a number's own line must say beside "complete": a latency's too few blocks, a
backstop, load; a CUDA prediction's kernels it could not follow.

The decision (docs/workload-measurement.md, "A latency's line says what it is"): a warmed
median from fewer blocks than ``min_blocks``, a timing stopped by the wall-clock backstop,
or one taken on a loaded host stays ``complete`` (the median *was* measured, and the
status is the measurement's, owned by ``measure/latency.py``) but is **complete with
warnings**: every surface that prints it (a stage's result line, the text summary, the
sweep page, the index) puts the warnings on the same line, never a bare "complete", and
never an IQR from one block. One function here, so the surfaces cannot drift apart.
"""

from __future__ import annotations

from ..report import BenchmarkReport, Diagnostic, PredictionReport
from .format import Cell

# Diagnostics of a latency pass that make its warmed figure "complete with warnings".
LATENCY_CAVEAT_CODES = ("too_few_blocks", "timing_backstop", "loaded_host", "latency_noisy")


def latency_caveats(report: BenchmarkReport) -> list[str]:
    """Short reasons, in a fixed order, e.g. ``['1 block < min 5', 'timing backstop']``."""
    lat = report.latency
    if lat is None:
        return []
    codes = {d.code for d in report.diagnostics}
    stats = lat.stats
    found: list[str] = []
    if "too_few_blocks" in codes:
        blocks = stats.blocks if stats is not None else "?"
        minimum = lat.settings.get("min_blocks")
        found.append(
            f"{blocks} block(s) < min {minimum}" if minimum else f"{blocks} block(s): too few"
        )
    if "timing_backstop" in codes:
        found.append("stopped by the timing backstop")
    if "loaded_host" in codes:
        found.append("loaded host")
    if "latency_noisy" in codes and stats is not None and stats.relative_iqr is not None:
        found.append(f"noisy: IQR/median {stats.relative_iqr:.0%}")
    return found


def peak_warnings(report: PredictionReport) -> list[Diagnostic]:
    """The warnings that name a prediction's ``peak`` (a CUDA prediction's kernels it could
    not follow, e.g. ``cuda_autocast_not_run``): a complete peak carries them on its line."""
    return [d for d in report.diagnostics if d.severity == "warning" and d.metric == "peak"]


def prediction_caveats(report: PredictionReport) -> list[str]:
    """The codes of :func:`peak_warnings`, sorted once each: the short form for one line."""
    return sorted({d.code for d in peak_warnings(report)})


def status_text(status: str, caveats: list[str]) -> str:
    """``complete`` or ``complete with warnings: 1 block(s) < min 5; loaded host``."""
    if not caveats:
        return status
    return f"{status} with warnings: {'; '.join(caveats)}"


def caveat_cell(cell: Cell, caveats: list[str]) -> Cell:
    """A table cell whose text carries the warnings: ``5.69 ms ⚠ 1 block(s) < min 5``."""
    if not caveats:
        return cell
    joined = "; ".join(caveats)
    return Cell(
        f"{cell.text} ⚠ {joined}", f"{cell.title}; complete with warnings: {joined}", cell.cls
    )


__all__ = [
    "LATENCY_CAVEAT_CODES",
    "caveat_cell",
    "latency_caveats",
    "peak_warnings",
    "prediction_caveats",
    "status_text",
]
