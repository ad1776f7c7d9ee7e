"""compare_reports: totals deltas, layer matching, refusals, incomplete propagation."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchscan_stages.compare.reports import compare_reports, metric_delta
from torchscan_stages.provenance import build_provenance
from torchscan_stages.report import (
    AnalysisReport,
    AnalysisTotals,
    BenchmarkReport,
    ExecutionRecord,
    LayerMetrics,
    LayerRecord,
    MetricResult,
    ParameterStats,
    ValueMeta,
)

MODULE = {"unit": "FLOPs", "scope": "forward", "method": "module_formula"}


def _metric(
    value: int | None, *, unit: str = "FLOPs", method: str = "module_formula", partial: bool = False
) -> MetricResult:
    kwargs = {"unit": unit, "scope": "forward", "method": method}
    if value is None:
        return MetricResult.unavailable(**kwargs)
    if partial:
        return MetricResult.partial(value, **kwargs)
    return MetricResult.complete(value, **kwargs)


def _layer(
    path: str, flops: int, *, call_index: int = 0, type_: str = "Linear", params: int = 10
) -> LayerRecord:
    tensor = ValueMeta(kind="tensor", shape=[1, 4], dtype="float32", device="cpu")
    unavailable = MetricResult.unavailable(unit="pixels", scope="forward", method="module_formula")
    return LayerRecord(
        path=path,
        call_index=call_index,
        name=path.rsplit(".", 1)[-1],
        depth=path.count(".") + 1,
        type=type_,
        is_leaf=True,
        input=tensor,
        output=tensor,
        params=ParameterStats(
            parameters=params,
            trainable_parameters=params,
            parameter_bytes=4 * params,
            buffer_elements=0,
            buffer_bytes=0,
        ),
        metrics=LayerMetrics(
            module_flops=_metric(flops),
            macs=_metric(flops // 2, unit="MACs"),
            dmas=_metric(3 * flops, unit="elements"),
            receptive_field=unavailable,
            effective_stride=unavailable,
            effective_padding=unavailable,
        ),
    )


def _report(
    layers: list[LayerRecord], *, dtype: str = "float32", operator: MetricResult | None = None
) -> AnalysisReport:
    flops = sum(layer.metrics.module_flops.value or 0 for layer in layers)
    params = sum(layer.params.parameters for layer in layers)
    count = {"unit": "parameters", "scope": "model", "method": "parameter_count"}
    return AnalysisReport(
        provenance=build_provenance(),
        model_type="Net",
        mode="full",
        inputs=ValueMeta(
            kind="tuple", items=[ValueMeta(kind="tensor", shape=[1, 4], dtype=dtype, device="cpu")]
        ),
        layers=layers,
        totals=AnalysisTotals(
            parameters=MetricResult.complete(params, **count),
            trainable_parameters=MetricResult.complete(params, **count),
            frozen_parameters=MetricResult.complete(0, **count),
            parameter_bytes=MetricResult.complete(
                4 * params, unit="bytes", scope="model", method="parameter_count"
            ),
            buffer_elements=MetricResult.complete(
                0, unit="elements", scope="model", method="parameter_count"
            ),
            buffer_bytes=MetricResult.complete(
                0, unit="bytes", scope="model", method="parameter_count"
            ),
            module_flops=_metric(flops),
            macs=_metric(flops // 2, unit="MACs"),
            dmas=_metric(3 * flops, unit="elements"),
            operator_flops=operator or _metric(flops, method="operator_dispatch"),
        ),
    )


def test_totals_and_layers_are_matched_by_path_and_call_index() -> None:
    before = _report([_layer("fc1", 100), _layer("fc2", 50), _layer("fc2", 50, call_index=1)])
    after = _report([_layer("fc1", 80), _layer("fc2", 50), _layer("fc3", 30)])
    diff = compare_reports(before, after)
    # module FLOPs: before 100 + 50 + 50 = 200, after 80 + 50 + 30 = 160 -> delta -40, ratio 0.8
    assert diff.totals["module_flops"].delta == -40
    assert diff.totals["module_flops"].ratio == pytest.approx(0.8)
    assert [(k.path, k.call_index) for k in diff.removed] == [("fc2", 1)]
    assert [(k.path, k.call_index) for k in diff.added] == [("fc3", 0)]
    assert [(c.path, c.call_index) for c in diff.changed] == [("fc1", 0)]
    # only changed metrics are listed: fc1 FLOPs 100 -> 80, MACs 50 -> 40, DMAs 300 -> 240
    assert sorted(diff.changed[0].metrics) == ["dmas", "macs", "module_flops"]
    assert diff.changed[0].metrics["macs"].delta == -10


def test_incomplete_side_gives_no_numeric_delta() -> None:
    before = _report([_layer("fc1", 100)])
    after = _report(
        [_layer("fc1", 100)], operator=_metric(70, method="operator_dispatch", partial=True)
    )
    delta = compare_reports(before, after).totals["operator_flops"]
    assert (delta.status, delta.delta, delta.ratio) == ("partial", None, None)
    assert any(
        d.code == "incomplete_delta" and d.metric == "operator_flops"
        for d in compare_reports(before, after).diagnostics
    )


def test_different_method_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"totals.module_flops: method differs"):
        metric_delta(
            _metric(1), _metric(1, method="operator_dispatch"), field="totals.module_flops"
        )


def test_different_dtype_is_reported() -> None:
    diff = compare_reports(
        _report([_layer("fc1", 1)]), _report([_layer("fc1", 1)], dtype="bfloat16")
    )
    messages = [d.message for d in diff.diagnostics if d.code == "input_differs"]
    assert messages == ["input dtypes is different: before=['float32'], after=['bfloat16']"]


def test_benchmark_report_is_refused() -> None:
    bench = BenchmarkReport(
        provenance=build_provenance(),
        execution=ExecutionRecord(
            device="cpu", num_threads=1, num_interop_threads=1, grad_enabled=False
        ),
    )
    with pytest.raises(TypeError, match="compare_benchmarks"):
        compare_reports(bench, _report([]))  # type: ignore[arg-type]


def test_paths_are_loaded_and_diff_round_trips(tmp_path: Path) -> None:
    before = _report([_layer("fc1", 100)]).save(tmp_path / "before.json")
    after = _report([_layer("fc1", 100)]).save(tmp_path / "after.json")
    diff = compare_reports(before, after)
    assert diff.totals["module_flops"].delta == 0
    assert type(diff).model_validate_json(diff.model_dump_json()) == diff
