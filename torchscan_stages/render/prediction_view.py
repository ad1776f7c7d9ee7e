"""PredictionReport view: the predicted peak, whether it fits, and where the bytes go."""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from ..report import MetricResult, PredictionReport
from .analysis_view import TotalView
from .caveats import peak_warnings
from .common import reason_for
from .format import DASH, Cell, iec_bytes, metric_cell, percent
from .svg import Point, bar_chart, line_chart, metric_bar

MODULE_ROWS = 25
_CATEGORY_LABEL = {
    "parameters": "parameters",
    "buffers": "buffers",
    "gradients": "gradients",
    "optimizer_state": "optimizer state",
    "activations": "activations (made in a module's forward)",
    "temporaries": "temporaries (backward and optimizer step)",
    "other": "other (inputs, losses: made outside any module)",
    "unsharded_parameters": "unsharded parameters (FSDP2 all-gathered, this rank's copy)",
    "unsharded_gradients": "unsharded gradients (before their reduce-scatter)",
    "all_gather_buffers": "all-gather buffers (FSDP2 collectives)",
    "reduce_scatter_buffers": "reduce-scatter buffers (FSDP2 collectives)",
}


@dataclass(slots=True)
class PredictionView:
    cards: list[TotalView]
    fits: str  # fits | does_not_fit | undecided | no_capacity
    capacity: str
    categories: list[tuple[str, Cell, str]]
    category_chart: Markup | None
    modules: list[tuple[str, Cell, str]]
    modules_more: int
    phases: list[tuple[str, Cell]]
    settings: list[tuple[str, str]]
    curve: list[tuple[str, Cell, str]]  # batch, predicted peak, fits
    curve_chart: Markup | None


def _curve(report: PredictionReport) -> tuple[list[tuple[str, Cell, str]], Markup | None]:
    """The peak-vs-batch rows and chart, with the owner's capacity as a dashed line."""
    if not report.batch_curve:
        return [], None
    verdict = {True: "fits", False: "does not fit", None: DASH}
    rows = [(str(p.batch), metric_cell(p.peak), verdict[p.fits]) for p in report.batch_curve]
    points = [
        Point(str(p.batch), p.peak.known_value, p.peak.status, iec_bytes(p.peak.known_value))
        if p.peak.known_value is not None
        else Point(str(p.batch), None, p.peak.status, DASH)
        for p in report.batch_curve
    ]
    capacity = report.capacity_bytes
    chart = line_chart(
        {"predicted peak": points},
        [p.x for p in points],
        label="predicted peak by batch",
        formatter=lambda v: iec_bytes(int(v)),
        x_text="batch",
        reference=("capacity", float(capacity)) if capacity is not None else None,
    )
    return rows, chart


def _share(result: MetricResult, whole: float) -> str:
    return percent(float(result.known_value), whole) if result.known_value is not None else DASH


def prediction_view(report: PredictionReport) -> PredictionView:
    peak = report.peak
    if peak.status == "complete":  # a complete peak's warnings stand beside it
        warned = peak_warnings(report)
        joined = "; ".join(f"{d.code}: {d.message}" for d in warned)
        reason = f"with warnings: {joined}" if warned else None
    else:
        reason = reason_for(report.diagnostics, "peak")
    cards = [TotalView("Predicted peak", metric_cell(peak, reason=reason), peak.status, reason)]
    for label, extra in (
        ("First step (fresh optimizer)", report.first_step_peak),
        ("Steady state (optimizer state exists)", report.steady_state_peak),
        ("Resident before the step", report.resident_bytes),
    ):
        if (
            extra is not None
            and extra != peak
            and (extra.known_value or extra.status != "complete")
        ):
            cards.append(TotalView(label, metric_cell(extra), extra.status, None))
    if report.capacity_bytes is None:
        fits, capacity = "no_capacity", "no capacity given"
    else:
        capacity = f"{iec_bytes(report.capacity_bytes)} ({report.capacity_bytes:,} bytes)"
        fits = {True: "fits", False: "does_not_fit", None: "undecided"}[report.fits]
    whole = float(peak.known_value or 0)
    categories = [
        (_CATEGORY_LABEL.get(name, name), metric_cell(result), _share(result, whole))
        for name, result in report.by_category.items()
    ]
    bars = [
        metric_bar(_CATEGORY_LABEL.get(name, name).split(" (")[0], result)
        for name, result in report.by_category.items()
        if (result.known_value or 0) > 0
    ]
    modules = [
        (name, metric_cell(result), _share(result, whole))
        for name, result in list(report.by_module.items())[:MODULE_ROWS]
    ]
    phases = [(name.replace("_", " "), metric_cell(r)) for name, r in report.by_phase.items()]
    settings = [
        ("target device", report.device),
        ("allocator model", report.allocator),
        ("rounding", f"{report.rounding_bytes:,} bytes" if report.rounding_bytes > 1 else "none"),
        ("phase at the peak", (report.phase_at_peak or DASH).replace("_", " ")),
        ("module running at the peak", report.module_at_peak or DASH),
        ("ran without data", "yes (fake tensors)" if report.ran_without_data else "no"),
        ("workload calls", f"{report.workload_calls:,}"),
    ]
    if report.world_size is not None:
        settings.insert(0, ("sharding", f"{report.sharding or 'none'}: rank {report.rank} "
                            f"of a fake world of {report.world_size}"))  # fmt: skip
    settings.append(
        ("headline (decides fits, with resident bytes)", report.headline.replace("_", " "))
    )
    settings += [
        (f"resident {name.replace('_', ' ')} (not in the peak)", metric_cell(result).text)
        for name, result in report.resident_by_category.items()
        if result.known_value
    ]
    settings += [("assumption", note) for note in report.assumptions]
    curve, curve_chart = _curve(report)
    return PredictionView(
        curve=curve,
        curve_chart=curve_chart,
        cards=cards,
        fits=fits,
        capacity=capacity,
        categories=categories,
        category_chart=bar_chart(bars, label="predicted peak by category") if bars else None,
        modules=modules,
        modules_more=max(len(report.by_module) - MODULE_ROWS, 0),
        phases=phases,
        settings=settings,
    )
