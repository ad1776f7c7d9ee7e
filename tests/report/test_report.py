"""Report models: MetricResult invariants, round trips, load_report refusals, atomic save."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from torchscan_stages.provenance import build_provenance
from torchscan_stages.report import (
    SCHEMA_VERSION,
    STALE_TMP_AGE_S,
    FlopReport,
    IncompleteAnalysisError,
    MetricResult,
    ParameterStats,
    atomic_write_text,
    check_output_path,
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
    # in_order: the caller's complete, ordered dict becomes the state; the fields-set is the
    # class's one shared set, equal to what model_construct records
    state = dict(stats)
    direct = trusted_construct(ParameterStats, state, in_order=True)
    assert direct == slow and direct.model_fields_set == slow.model_fields_set
    assert direct.__dict__ is state
    other = trusted_construct(ParameterStats, dict(stats), in_order=True)
    assert other.model_fields_set is direct.model_fields_set


# ------------------------------------------------------- impossible numbers


def _benchmark_document() -> dict[str, object]:
    """A valid benchmark report as a JSON document, with one latency section."""
    latency = {
        "first_call": {"status": "complete", "value": 0.5, "known_value": 0.5, **SECONDS},
        "warmed": {"status": "complete", "value": 0.25, "known_value": 0.25, **SECONDS},
        "throughput": {
            "status": "complete",
            "value": 4.0,
            "known_value": 4.0,
            "unit": "calls/s",
            "scope": "warmed_block_average",
            "method": "work_units_per_median_latency",
        },
        "block_times_s": [0.25, 0.25, 0.25],
        "timer": "time.perf_counter",
        "synchronized": False,
    }
    execution = {
        "device": "cpu",
        "num_threads": 1,
        "num_interop_threads": 1,
        "grad_enabled": False,
    }
    document = {
        "kind": "benchmark",
        "schema_version": SCHEMA_VERSION,
        "provenance": json.loads(build_provenance().model_dump_json()),
        "execution": execution,
        "latency": latency,
    }
    load_report(json.dumps(document))  # valid as built
    return document


SECONDS = {"unit": "s", "scope": "warmed_block_average", "method": "wall_clock"}


def test_negative_flops_refused_naming_the_field() -> None:
    document = json.loads(_flop_report().model_dump_json())
    document["total"] = {"status": "complete", "value": -979, "known_value": -979, **FLOPS}
    with pytest.raises(ValueError, match=r"invalid flops report at total: .*must be >= 0"):
        load_report(json.dumps(document))


def test_negative_parameters_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="parameters"):
        ParameterStats(
            parameters=-1,
            trainable_parameters=0,
            parameter_bytes=0,
            buffer_elements=0,
            buffer_bytes=0,
        )


def test_negative_bytes_refused() -> None:
    with pytest.raises(ValidationError, match="must be >= 0 for unit 'bytes'"):
        MetricResult.complete(-1, unit="bytes", scope="process_rss", method="os_accounting")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.25])
def test_nan_inf_or_negative_block_time_refused(bad: float) -> None:
    document = _benchmark_document()
    document["latency"]["block_times_s"][1] = bad  # type: ignore[index]
    # json.dumps writes NaN/Infinity, which json.loads (and so load_report) reads back
    with pytest.raises(ValueError, match=r"at latency\.block_times_s\.1"):
        load_report(json.dumps(document))


def test_zero_work_units_refused() -> None:
    document = _benchmark_document()
    document["work_units"] = 0
    with pytest.raises(ValueError, match=r"at work_units: .*greater than 0"):
        load_report(json.dumps(document))


def test_negative_transposed_padding_still_allowed() -> None:
    # a transposed convolution's effective padding floor((k-1-p)/s) can be negative:
    # k=1, p=2, s=1 -> floor((0-2)/1) = -2; input_positions is not a count
    result = MetricResult.complete(-2, unit="input_positions", scope="forward", method="m")
    assert result.value == -2


# ------------------------------------------------------- unreadable files


def test_load_report_on_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is a directory, not a report file"):
        load_report(tmp_path)
    with pytest.raises(ValueError, match="is a directory, not a report file"):
        load_report(str(tmp_path))


def test_load_report_on_a_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"name": "caf\xe9"}')
    with pytest.raises(ValueError, match=r"not UTF-8 text: byte 13 is b'\\xe9'"):
        load_report(path)
    with pytest.raises(ValueError, match="not UTF-8"):
        load_report(b"\xff\xfe{}")


def test_load_report_on_deeply_nested_json() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ValueError, match="nested too deeply"):
        load_report(deep)
    nested = '{"kind": "flops", "schema_version": 1, "conventions": ' + deep + "}"
    with pytest.raises(ValueError, match="nested too deeply"):
        load_report(nested)


def test_load_report_refuses_other_argument_types() -> None:
    with pytest.raises(TypeError, match="got int"):
        load_report(3)  # type: ignore[arg-type]


# ---------------------------------------------------- interrupted writes


def test_sigkilled_write_temporaries_are_cleaned_on_next_write(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    stale = tmp_path / ".report.json.ab_cd123.tmp"  # mkstemp's pattern: 8 random characters
    fresh = tmp_path / ".report.json.zz_zz999.tmp"  # as if another write is running now
    other = tmp_path / ".other.json.ab_cd123.tmp"  # another target's temporary
    odd = tmp_path / ".report.json.not-mkstemp.tmp"  # not the exact pattern
    for path in (stale, fresh, other, odd):
        path.write_text("partial")
    old = time.time() - 2 * STALE_TMP_AGE_S
    for path in (stale, other, odd):
        os.utime(path, (old, old))
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert not stale.exists()
    assert fresh.exists() and other.exists() and odd.exists()


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_report_files_honour_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    previous = os.umask(umask)
    try:
        path = atomic_write_text(tmp_path / "r.json", "{}")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == mode  # 0o666 & ~umask


def test_atomic_write_to_a_directory_refused(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    with pytest.raises(IsADirectoryError):
        atomic_write_text(tmp_path / "out", "x")
    assert list((tmp_path / "out").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_schema_version_policy_is_written_down() -> None:
    import torchscan_stages.report as report_module

    doc = report_module.__doc__ or ""
    assert "Schema-version policy" in doc and "product_flops" in doc
    with pytest.raises(ValueError, match="re-create the report with this version"):
        load_report('{"kind": "flops", "schema_version": 0}')


def test_check_output_path_refuses_inputs_and_directories(tmp_path: Path) -> None:
    report = _flop_report()
    saved = report.save(tmp_path / "a.json")
    with pytest.raises(ValueError, match="is one of the input reports; refusing to overwrite"):
        check_output_path(tmp_path / "." / "a.json", [report, "{}", saved])
    with pytest.raises(ValueError, match=r"is a directory; name the file to write, such as"):
        check_output_path(tmp_path, [saved])
    # a new file, JSON text and report models never clash
    check_output_path(tmp_path / "b.json", [saved])
    check_output_path(saved, [report, report.model_dump_json()])
    check_output_path(None, [saved])
