"""Report models: MetricResult invariants, round trips, load_report refusals, atomic save."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from torchscan_stages.provenance import build_provenance
from torchscan_stages.report import (
    SCHEMA_VERSION,
    FlopReport,
    IncompleteAnalysisError,
    MetricResult,
    ParameterStats,
    atomic_write_text,
    combine_sum,
    load_report,
    report_json_schema,
    trusted_construct,
)

FLOPS = {"unit": "FLOPs", "scope": "forward", "method": "operator_dispatch"}


def test_complete_requires_value() -> None:
    with pytest.raises(ValidationError, match="complete"):
        MetricResult(status="complete", value=None, known_value=None, **FLOPS)


def test_partial_refuses_value() -> None:
    with pytest.raises(ValidationError, match="partial"):
        MetricResult(status="partial", value=3, known_value=3, **FLOPS)


def test_unavailable_refuses_numbers() -> None:
    with pytest.raises(ValidationError, match="unavailable"):
        MetricResult(status="unavailable", value=None, known_value=0, **FLOPS)


def test_non_finite_refused() -> None:
    with pytest.raises(ValidationError, match="finite"):
        MetricResult.complete(float("nan"), **FLOPS)


def test_combine_sum_propagates_incompleteness() -> None:
    parts = [MetricResult.complete(10, **FLOPS), MetricResult.unavailable(**FLOPS)]
    total = combine_sum(parts, **FLOPS)
    # 10 known + 1 unknown part = a lower bound of 10, never a complete 10
    assert (total.status, total.value, total.known_value) == ("partial", None, 10)
    assert combine_sum([MetricResult.unavailable(**FLOPS)], **FLOPS).status == "unavailable"
    assert combine_sum([], **FLOPS).value == 0


def test_combine_sum_refuses_mixed_methods() -> None:
    other = MetricResult.complete(1, unit="FLOPs", scope="forward", method="module_formula")
    with pytest.raises(ValueError, match="different unit/scope/method"):
        combine_sum([other], **FLOPS)


def _flop_report() -> FlopReport:
    return FlopReport(provenance=build_provenance(), total=MetricResult.complete(42, **FLOPS))


def test_round_trip_and_load(tmp_path: Path) -> None:
    report = _flop_report()
    assert FlopReport.model_validate_json(report.model_dump_json()) == report
    path = report.save(tmp_path / "r.json")
    assert load_report(path) == report
    assert load_report(str(path)) == report
    assert load_report(report.model_dump_json()) == report


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{not json", "malformed JSON"),
        ("[1, 2]", "not a torchscan_stages report"),
        ('{"name": "x"}', "no 'kind' and 'schema_version'"),
        ('{"kind": "weather", "schema_version": 1}', "unknown report kind 'weather'"),
        ('{"kind": "flops", "schema_version": 99}', "unsupported schema_version 99"),
        ('{"kind": "flops", "schema_version": 1}', "invalid flops report"),
    ],
)
def test_load_report_refuses(document: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_report(document)


def test_load_report_missing_file() -> None:
    with pytest.raises(ValueError, match="neither a JSON document nor an existing file"):
        load_report("no/such/report.json")


def test_json_schema_export() -> None:
    schema = report_json_schema("analysis")
    assert schema["properties"]["kind"]["const"] == "analysis"
    assert json.dumps(schema)
    with pytest.raises(ValueError, match="unknown report kind"):
        report_json_schema("nope")


def test_schema_version_is_recorded() -> None:
    assert json.loads(_flop_report().model_dump_json())["schema_version"] == SCHEMA_VERSION


def test_atomic_write_keeps_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    atomic_write_text(target, "old")

    with pytest.raises(TypeError):
        atomic_write_text(target, 123)  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_incomplete_error_carries_report() -> None:
    report = _flop_report()
    error = IncompleteAnalysisError(report, ["total"])
    assert error.report is report
    assert "total" in str(error)


@pytest.mark.parametrize("version", ["true", "1.0", '"1"'])
def test_schema_version_must_be_the_integer(version: str) -> None:
    with pytest.raises(ValueError, match="unsupported schema_version"):
        load_report('{"kind": "flops", "schema_version": ' + version + "}")


@pytest.mark.parametrize("value", ["3", True])
def test_metric_numbers_are_not_coerced(value: object) -> None:
    with pytest.raises(ValidationError):
        MetricResult(status="complete", value=value, known_value=value, **FLOPS)


def test_missing_path_object_is_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no report file"):
        load_report(tmp_path / "missing.json")


def test_trusted_construct_equals_model_construct() -> None:
    stats = {
        "parameters": 42,
        "trainable_parameters": 40,
        "parameter_bytes": 168,
        "buffer_elements": 0,
        "buffer_bytes": 0,
        "shared_parameters": 2,
    }
    fast = trusted_construct(ParameterStats, dict(stats))
    slow = ParameterStats.model_construct(**stats)
    assert fast == slow and fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump_json() == slow.model_dump_json()
    assert ParameterStats.model_validate_json(fast.model_dump_json()) == fast
    # field order and a state of its own, whatever order or dict the caller passed
    shuffled = dict(reversed(list(stats.items())))
    again = trusted_construct(ParameterStats, shuffled)
    assert again.model_dump_json() == slow.model_dump_json()
    shuffled["parameters"] = 0
    assert again.parameters == 42
    # a missing field falls back to model_construct, which fills the default
    partial = dict(stats)
    del partial["shared_parameters"]
    assert trusted_construct(ParameterStats, partial).shared_parameters == 0
