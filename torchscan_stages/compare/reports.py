"""Comparison of model cost reports (compare_reports) and workloads (compare_benchmarks).

Numbers are compared only when they are comparable: same unit, scope and method, both
complete. Anything else is carried as an incomplete delta, never as a number.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ..provenance import build_provenance
from ..report import (
    AnalysisReport,
    Diagnostic,
    LayerChange,
    LayerKey,
    LayerRecord,
    MetricDelta,
    MetricResult,
    ReportDiff,
    Status,
    report_of_kind,
)

ReportSource = AnalysisReport | str | os.PathLike[str]


def metric_delta(before: MetricResult, after: MetricResult, *, field: str) -> MetricDelta:
    """Delta of one metric; numeric only when both sides are complete.

    Refuses results whose unit, scope or method differ, naming the field and both values.
    """
    for attribute in ("unit", "scope", "method"):
        left, right = getattr(before, attribute), getattr(after, attribute)
        if left != right:
            raise ValueError(
                f"{field}: {attribute} differs (before={left!r}, after={right!r}); results "
                "of different units, scopes or methods are never compared"
            )
    if before.status == "complete" and after.status == "complete":
        assert before.value is not None and after.value is not None
        ratio = after.value / before.value if before.value != 0 else None
        return MetricDelta(
            before=before,
            after=after,
            delta=after.value - before.value,
            ratio=ratio,
            status="complete",
        )
    status: Status = "unavailable" if "unavailable" in (before.status, after.status) else "partial"
    return MetricDelta(before=before, after=after, delta=None, ratio=None, status=status)


def _as_analysis(report: Any, argument: str) -> AnalysisReport:
    def refusal(kind: str) -> str:
        if kind == "benchmark":
            return (
                f"compare_reports({argument}=...) got a BenchmarkReport: timing and workload "
                "evidence are compared with compare_benchmarks, not compare_reports"
            )
        return (
            f"compare_reports({argument}=...) expects an AnalysisReport (from crawl_module or "
            f"summary) or its JSON path, got {kind!r}"
        )

    return report_of_kind(report, AnalysisReport, refusal)


def _layer_metrics(layer: LayerRecord) -> dict[str, MetricResult]:
    metrics = {name: getattr(layer.metrics, name) for name in type(layer.metrics).model_fields}
    metrics["parameters"] = MetricResult.complete(
        layer.params.parameters, unit="parameters", scope="module_own", method="parameter_count"
    )
    return metrics


def _changed_layer(before: LayerRecord, after: LayerRecord) -> LayerChange | None:
    where = f"layer {before.path!r} (call {before.call_index})"
    old, new = _layer_metrics(before), _layer_metrics(after)
    changes: dict[str, MetricDelta] = {}
    for name, old_metric in old.items():
        new_metric = new[name]
        if old_metric == new_metric:
            continue
        changes[name] = metric_delta(old_metric, new_metric, field=f"{where}.{name}")
    if not changes and before.type == after.type:
        return None
    return LayerChange(
        path=before.path,
        call_index=before.call_index,
        type_before=before.type,
        type_after=after.type,
        metrics=changes,
    )


def _context_diagnostics(before: AnalysisReport, after: AnalysisReport) -> list[Diagnostic]:
    """Say when the two sides ran on different software, inputs or analysis modes."""
    diagnostics: list[Diagnostic] = []

    def differs(field: str, old: object, new: object, code: str) -> None:
        if old != new:
            diagnostics.append(
                Diagnostic(
                    code=code,
                    severity="warning",
                    message=f"{field} is different: before={old!r}, after={new!r}",
                )
            )

    differs(
        "torch version",
        before.provenance.torch_version,
        after.provenance.torch_version,
        "environment_differs",
    )
    differs(
        "package version",
        before.provenance.package_version,
        after.provenance.package_version,
        "environment_differs",
    )
    differs("analysis mode", before.mode, after.mode, "mode_differs")
    old_inputs, new_inputs = list(_tensors(before.inputs)), list(_tensors(after.inputs))
    differs("input dtypes", [t[1] for t in old_inputs], [t[1] for t in new_inputs], "input_differs")
    differs(
        "input devices", [t[2] for t in old_inputs], [t[2] for t in new_inputs], "input_differs"
    )
    differs("input shapes", [t[0] for t in old_inputs], [t[0] for t in new_inputs], "input_differs")
    return diagnostics


def _tensors(meta: Any) -> Iterable[tuple[list[int] | None, str | None, str | None]]:
    if meta.kind == "tensor":
        yield meta.shape, meta.dtype, meta.device
    for item in meta.items or []:
        yield from _tensors(item)


def compare_reports(before: ReportSource, after: ReportSource) -> ReportDiff:
    """Totals deltas and per-layer changes between two AnalysisReports.

    Layers are matched by ``(path, call_index)``; a BenchmarkReport is refused (use
    compare_benchmarks). Different torch versions, modes or inputs are reported as
    diagnostics on the diff.
    """
    old = _as_analysis(before, "before")
    new = _as_analysis(after, "after")
    totals = {
        name: metric_delta(
            getattr(old.totals, name), getattr(new.totals, name), field=f"totals.{name}"
        )
        for name in type(old.totals).model_fields
    }
    old_layers = {(layer.path, layer.call_index): layer for layer in old.layers}
    new_layers = {(layer.path, layer.call_index): layer for layer in new.layers}
    removed = [
        LayerKey(path=layer.path, call_index=layer.call_index, type=layer.type)
        for key, layer in old_layers.items()
        if key not in new_layers
    ]
    added = [
        LayerKey(path=layer.path, call_index=layer.call_index, type=layer.type)
        for key, layer in new_layers.items()
        if key not in old_layers
    ]
    changed = [
        change
        for key, layer in old_layers.items()
        if key in new_layers and (change := _changed_layer(layer, new_layers[key])) is not None
    ]
    diagnostics = _context_diagnostics(old, new)
    for name, delta in totals.items():
        if delta.status != "complete":
            diagnostics.append(
                Diagnostic(
                    code="incomplete_delta",
                    severity="warning",
                    metric=name,
                    message=(
                        f"totals.{name}: before is {delta.before.status}, after is "
                        f"{delta.after.status}; no numeric delta is given"
                    ),
                )
            )
    return ReportDiff(
        provenance=build_provenance(),
        before_model=old.model_type,
        after_model=new.model_type,
        totals=totals,
        added=added,
        removed=removed,
        changed=changed,
        before_env_hash=old.provenance.env_hash,
        after_env_hash=new.provenance.env_hash,
        diagnostics=diagnostics,
    )


__all__ = ["compare_reports", "metric_delta"]
