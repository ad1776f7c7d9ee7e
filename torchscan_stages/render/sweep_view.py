"""Sweep view: latency and throughput against threads, one line per precision.

A report belongs to a sweep when its ``provenance.run.config`` names ``threads`` or
``precision`` (as the pipeline's Hydra config does); a value the config does not name is
taken from the report's own execution record, which is what actually ran.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from ..report import BenchmarkReport, MetricResult
from .format import Cell, human, metric_cell, seconds, si
from .svg import Point, line_chart


@dataclass(slots=True)
class SweepRow:
    precision: str
    threads: str
    name: str
    anchor: str
    latency: Cell
    throughput: Cell
    device: str


@dataclass(slots=True)
class SweepView:
    rows: list[SweepRow]
    latency_chart: Markup
    throughput_chart: Markup
    unit: str
    notes: list[str]


def _config_value(config: dict[str, Any], key: str) -> Any:
    """``config[key]``; a config group (dict) gives its ``name`` or ``dtype`` entry."""
    value = config.get(key)
    if isinstance(value, dict):
        for inner in ("name", "dtype", "value"):
            if inner in value:
                return value[inner]
        return None
    return value


def sweep_key(report: BenchmarkReport) -> tuple[str, int] | None:
    """(precision, threads) of a sweep member, or None when the config names neither."""
    run = report.provenance.run
    if run is None or report.latency is None:
        return None
    threads = _config_value(run.config, "threads")
    precision = _config_value(run.config, "precision")
    if threads is None and precision is None:
        return None
    if threads is None:
        threads = report.execution.num_threads
    if precision is None:
        precision = report.execution.precision or "default"
    try:
        thread_count = int(threads)
    except (TypeError, ValueError):
        return None
    return str(precision), thread_count


def _point(x: str, result: MetricResult) -> Point:
    cell = metric_cell(result)
    value = float(result.known_value) if result.known_value is not None else None
    return Point(x=x, value=value, status=result.status, title=cell.text)


def sweep_view(members: list[tuple[str, BenchmarkReport]]) -> SweepView | None:
    """``members`` are (anchor, report); needs at least two keyed benchmark reports."""
    keyed = [(anchor, r, key) for anchor, r in members if (key := sweep_key(r)) is not None]
    if len(keyed) < 2:
        return None
    keyed.sort(key=lambda item: (item[2][0], item[2][1]))
    threads = sorted({key[1] for _, _, key in keyed})
    x_labels = [str(t) for t in threads]
    latency: dict[str, list[Point]] = {}
    throughput: dict[str, list[Point]] = {}
    rows: list[SweepRow] = []
    units = set()
    devices = set()
    for anchor, report, (precision, count) in keyed:
        assert report.latency is not None  # sweep_key requires it
        latency.setdefault(precision, []).append(_point(str(count), report.latency.warmed))
        throughput.setdefault(precision, []).append(_point(str(count), report.latency.throughput))
        units.add(report.latency.throughput.unit)
        devices.add(report.execution.device)
        rows.append(
            SweepRow(
                precision=precision,
                threads=str(count),
                name=report.name or anchor,
                anchor=anchor,
                latency=metric_cell(report.latency.warmed),
                throughput=metric_cell(report.latency.throughput),
                device=report.execution.device,
            )
        )
    unit = units.pop() if len(units) == 1 else "mixed units"
    notes = [
        "Timing jobs that share one host disturb each other; compare points measured the "
        "same way, on an otherwise idle machine.",
    ]
    if len(devices) > 1:
        notes.append("These reports ran on different devices: " + ", ".join(sorted(devices)))
    if unit == "mixed units":
        notes.append("Throughput units differ between reports; the throughput chart mixes them.")
    return SweepView(
        rows=rows,
        latency_chart=line_chart(
            latency,
            x_labels,
            label="warmed latency against threads",
            formatter=seconds,
            x_text="threads",
        ),
        throughput_chart=line_chart(
            throughput,
            x_labels,
            label="throughput against threads",
            formatter=lambda v: si(v) if unit.endswith("/s") else human(v, unit),
            x_text="threads",
        ),
        unit=unit,
        notes=notes,
    )
