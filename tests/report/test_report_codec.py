"""The compact report form (schema_version 2): round trips for every kind, old files, refusals.

No test here reads the clock: sizes and equalities only (timing is benchmarks/bench_report.py).
"""

from __future__ import annotations

import copy
import gzip
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import event, given
from hypothesis import strategies as st
from property_settings import property_settings
from record_samples import environment_sample, job_status_sample, sources_sample, sweep_sample
from served_reports import capacity_sample, served_sample
from simulated_clock import SimulatedClock
from torch import nn

from torchscan_stages import (
    compare_benchmarks,
    compare_reports,
    crawl_module,
    load_report,
    measure_flops,
    measure_latency,
    measure_peak_memory,
    measure_peak_rss,
    profile_workload,
)
from torchscan_stages.pipeline.evidence import comparison_evidence
from torchscan_stages.predict import predict_peak_memory
from torchscan_stages.provenance import build_provenance
from torchscan_stages.report import (
    READABLE_VERSIONS,
    REPORT_TYPES,
    SCHEMA_VERSION,
    AnalysisReport,
    LayerRecord,
    MetricEvidence,
    MetricsEvidence,
    report_text,
    save_report,
)
from torchscan_stages.report.codec import (
    COLUMN_DEFAULTS,
    build_layers,
    column_names,
    expand_layers,
)

DATA = Path(__file__).parents[1] / "data"


class Mystery(nn.Module):
    """No handler: its records carry partial metrics and an unsupported_module diagnostic."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.5


def _model() -> nn.Module:
    shared = nn.Linear(4, 4)  # called twice: two records, call_index 0 and 1
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), shared, Mystery(), shared)


def _history() -> Any:
    """The history of a real 4-commit git repository (tests/history/synthetic.py): 10 ms,
    then 13 ms from commit 2, with clean evidence sidecars."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "history"))
    from synthetic import fast_repo, lock, metrics

    from torchscan_stages.history import detect_steps, history_document, read_history

    with tempfile.TemporaryDirectory() as scratch:
        level = [0.010, 0.010, 0.013, 0.013]
        fast_repo(Path(scratch), [{"dvc.lock": lock("x"), **metrics(v, 4096)} for v in level])
        history = read_history(scratch)
        return history_document(history, detect_steps(history))


def _every_kind() -> dict[str, Any]:
    """One real report of every kind (latency from a simulated clock, never the host's)."""
    model = _model()
    analysis = crawl_module(model, (3,))
    wider = crawl_module(nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 4)), (3,))
    clock = SimulatedClock()
    rss_code = "from torchscan_stages.measure.rss_phases import mark_phase\nmark_phase('start')"
    reports = {
        "analysis": analysis,
        "structure": crawl_module(model, (3,), mode="structure"),
        "flops": measure_flops(lambda: model(torch.randn(2, 3))),
        "memory": measure_peak_memory(lambda: model(torch.randn(2, 3))),
        "latency": measure_latency(
            clock.workload(0.002, noise=0.1), options={"clock": clock}, work_units=4
        ),
        "rss": measure_peak_rss([sys.executable, "-c", rss_code], timeout=60),
        "profile": profile_workload(lambda: model(torch.randn(2, 3)), row_limit=5),
        "report_diff": compare_reports(analysis, wider),
        "benchmark_comparison": compare_benchmarks(
            clock.workload(1e-3, noise=0.01, seed=1),
            clock.workload(1.3e-3, noise=0.01, seed=2),
            check=lambda base, cand: True,
            options={"clock": clock},
        ),
        "prediction": predict_peak_memory(lambda: model(torch.randn(2, 3)), device="cpu"),
        "history": _history(),
        # served runs from injected records and traces (a LoadGen run is tests/serve's)
        "served": served_sample(tokens=3),
        "served_capacity": capacity_sample(),
    }
    reports["metrics_evidence"] = MetricsEvidence(
        provenance=build_provenance(),
        stage="compare",
        metrics={
            **comparison_evidence(reports["benchmark_comparison"]),
            "warmed_median_s": MetricEvidence(status="complete", warnings=["too_few_blocks"]),
        },
    )
    # the pipeline's records, each written by its own writer and read back
    reports["sweep_summary"] = sweep_sample()
    reports["job_status"] = job_status_sample()
    reports["environment"] = environment_sample()
    reports["sources"] = sources_sample()
    assert {r.kind for r in reports.values()} == set(REPORT_TYPES)  # every kind is here
    return reports


REPORTS = _every_kind()


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
@pytest.mark.parametrize("name", sorted(REPORTS))
def test_every_kind_round_trips_through_the_compact_form(
    tmp_path: Path, name: str, suffix: str
) -> None:
    report = REPORTS[name]
    path = save_report(report, tmp_path / f"r{suffix}")
    data = path.read_bytes()
    assert data.startswith(b"\x1f\x8b") == (suffix == ".json.gz")  # gzip only by name
    loaded = load_report(path)
    assert type(loaded) is type(report) and loaded == report
    # what was read writes the same bytes again: nothing drifts, nothing is lost
    assert save_report(loaded, tmp_path / f"again{suffix}").read_bytes() == data
    document = json.loads(gzip.decompress(data) if suffix == ".json.gz" else data)
    assert (document["kind"], document["schema_version"]) == (report.kind, SCHEMA_VERSION)


def test_the_field_by_field_form_of_this_version_still_loads() -> None:
    for report in REPORTS.values():
        assert load_report(report.model_dump_json(indent=2)) == report


@pytest.mark.parametrize(("name", "kind"), [("analysis_v1", "analysis"), ("flops_v1", "flops")])
def test_a_file_of_the_previous_format_loads(tmp_path: Path, name: str, kind: str) -> None:
    """Files written by schema_version 1 (the field-by-field form) load as this version."""
    path = DATA / f"{name}.json"
    assert json.loads(path.read_text())["schema_version"] == 1
    report = load_report(path)
    assert report.kind == kind and report.schema_version == SCHEMA_VERSION == 2
    assert READABLE_VERSIONS == (1, 2)
    if isinstance(report, AnalysisReport):
        # Sequential(Linear(3,4), ReLU, shared Linear(4,4), Mystery, shared) then a Conv1d:
        # 1 root + body + 5 body calls + conv = 8 records; the shared Linear twice
        assert len(report.layers) == 8
        assert [(r.path, r.call_index) for r in report.layers if r.path == "body.2"] == [
            ("body.2", 0),
            ("body.2", 1),
        ]
    assert load_report(save_report(report, tmp_path / "new.json")) == report


def test_compact_analysis_is_columns_with_shared_tables() -> None:
    report = REPORTS["analysis"]
    document = json.loads(report_text(report))
    layers = document["layers"]
    assert (layers["encoding"], layers["count"]) == ("columns", len(report.layers))
    # 6 records: root, 0, 1, 2 (call 0), 3, 2 (call 1)
    assert layers["columns"]["path"] == ["", "0", "1", "2", "3", "2"]
    assert layers["columns"]["call_index"] == [0, 0, 0, 0, 0, 1]
    assert set(layers["columns"]) <= set(column_names())
    # columns holding only their default are left out (no handler-less inclusive records)
    assert "inclusive" not in layers["columns"] and "params.shared_parameters" in COLUMN_DEFAULTS
    # equal MetricResults are stored once: fewer table entries than 6 metrics x 6 records
    assert len(layers["tables"]["metric"]) < 6 * 6
    loaded = load_report(report_text(report))
    assert isinstance(loaded, AnalysisReport)
    # the two calls of the shared Linear (4 -> 4, batch 1): 4 * 4 = 16 MACs each, one instance
    first, second = loaded.layers[3].metrics, loaded.layers[5].metrics
    assert first.macs.value == second.macs.value == 16 and first.macs is second.macs


def test_every_record_field_has_its_column() -> None:
    from torchscan_stages.report.codec import uncovered_fields

    assert uncovered_fields() == set()  # else the import itself raises, naming the field


def test_defaults_are_left_out() -> None:
    document = json.loads(report_text(REPORTS["flops"]))
    unavailable = [
        r for r in document["by_operator"].values() if r["flops"]["status"] == "unavailable"
    ]
    assert all("value" not in r["flops"] for r in unavailable)  # null is the default
    assert "diagnostics" not in document or document["diagnostics"]  # [] is the default


def _deep(blocks: int) -> nn.Module:
    block = [nn.Sequential(nn.Linear(8, 8), nn.ReLU(), Mystery()) for _ in range(blocks)]
    return nn.Sequential(*block)


def test_compact_is_much_smaller_than_field_by_field() -> None:
    report = crawl_module(_deep(50), (8,))  # 1 + 50 * 4 = 201 records
    assert len(report.layers) == 201
    full = len(report.model_dump_json(indent=2).encode())
    compact = len(report_text(report).encode())
    # the records were ~2.2 KB each field by field; as columns ~100 bytes, and the
    # per-record diagnostic messages (50 x ~450 bytes) now dominate
    assert compact * 4 < full, (compact, full)
    gz = len(gzip.compress(report_text(report).encode(), mtime=0))
    assert gz * 20 < full, (gz, full)


# ---------------------------------------------------------------------- refusals, one line


def _compact(report: Any) -> dict[str, Any]:
    return json.loads(report_text(report))


def _refusal(document: dict[str, Any]) -> str:
    with pytest.raises(ValueError) as caught:
        load_report(json.dumps(document))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_negative_parameters_in_a_column_named_by_record() -> None:
    document = _compact(REPORTS["analysis"])
    document["layers"]["columns"]["params.parameters"][1] = -1
    message = _refusal(document)
    assert message.startswith("<text>: invalid analysis report at layers.1.params.parameters:")
    assert "greater than or equal to 0" in message


def test_invalid_table_entry_named_by_the_first_record_using_it() -> None:
    document = _compact(REPORTS["analysis"])
    columns, metrics = document["layers"]["columns"], document["layers"]["tables"]["metric"]
    index = columns["metrics.macs"][2]
    metrics[index]["known_value"] = metrics[index]["value"] = -5  # a negative MAC count
    fields = [n for n in column_names() if n.startswith("metrics.")]
    first = next(  # pydantic reports records in order, then fields in order
        f"layers.{i}.{name}" for i in range(len(columns["path"])) for name in fields
        if columns[name][i] == index
    )  # fmt: skip
    assert f"invalid analysis report at {first}: Value error, MetricResult." in _refusal(document)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda c: c["layers"]["columns"]["metrics.macs"].__setitem__(0, 99),
            "layers.columns.metrics.macs.0: expected an index into layers.tables.metric",
        ),
        (
            lambda c: c["layers"]["columns"]["input"].__setitem__(0, True),
            "layers.columns.input.0: expected an index",
        ),
        (lambda c: c["layers"]["columns"].pop("path"), "layers.columns.path: missing column"),
        (
            lambda c: c["layers"]["columns"]["depth"].pop(),
            "layers.columns.depth: expected a list of 6 values",
        ),
        (
            lambda c: c["layers"]["columns"].__setitem__("colour", []),
            "layers.columns.colour: unknown column",
        ),
        (
            lambda c: c["layers"]["tables"]["metric"].append(c["layers"]["tables"]["metric"][0]),
            "entry used by no layer",
        ),
        (lambda c: c["layers"].__setitem__("encoding", "rows"), "layers.encoding: expected"),
        (lambda c: c["layers"].__setitem__("count", -1), "layers.count: expected a non-negative"),
        (lambda c: c.__setitem__("schema_version", 3), "reads schema_version 1 or 2"),
    ],
)
def test_broken_layout_refused_in_one_line(damage: Any, message: str) -> None:
    document = _compact(REPORTS["analysis"])
    damage(document)
    assert message in _refusal(document)


def test_a_version_1_file_with_columns_is_refused() -> None:
    document = _compact(REPORTS["analysis"])
    document["schema_version"] = 1  # columns did not exist in version 1
    assert "invalid analysis report at layers: Input should be a valid list" in _refusal(document)


def test_damaged_gzip_refused_naming_the_file(tmp_path: Path) -> None:
    path = save_report(REPORTS["flops"], tmp_path / "f.json.gz")
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(ValueError, match=r"f\.json\.gz: not a torchscan_stages report \(damaged"):
        load_report(path)


def test_gzip_read_by_content_whatever_the_name(tmp_path: Path) -> None:
    path = tmp_path / "plain-name.json"
    path.write_bytes(gzip.compress(report_text(REPORTS["flops"]).encode()))
    assert load_report(path) == REPORTS["flops"]
    assert load_report(path.read_bytes()) == REPORTS["flops"]


def test_nan_is_refused_when_writing(tmp_path: Path) -> None:
    report = REPORTS["latency"].model_copy(deep=True)
    report.latency.block_times_s[0] = float("nan")  # only a bypassed validator gets here
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        save_report(report, tmp_path / "nan.json")
    assert not (tmp_path / "nan.json").exists()


# ------------------------------------------------------------------- properties (hypothesis)

LAYERS = st.sampled_from(["linear", "relu", "mystery", "shared", "identity", "block"])


def _stack(kinds: list[str], width: int) -> nn.Module:
    shared = nn.Linear(width, width)
    parts: list[nn.Module] = []
    for kind in kinds:
        parts.append(
            {
                "linear": lambda: nn.Linear(width, width),
                "relu": nn.ReLU,
                "mystery": Mystery,
                "shared": lambda: shared,
                "identity": nn.Identity,
                "block": lambda: nn.Sequential(nn.Linear(width, width), nn.GELU()),
            }[kind]()
        )
    return nn.Sequential(*parts)


@property_settings(ci_examples=25)
@given(
    kinds=st.lists(LAYERS, min_size=0, max_size=8),
    width=st.integers(min_value=1, max_value=6),
    mode=st.sampled_from(["full", "structure"]),
    gz=st.booleans(),
)
def test_random_models_round_trip(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str], width: int, mode: str, gz: bool
) -> None:
    report = crawl_module(_stack(kinds, width), (width,), mode=mode)  # type: ignore[arg-type]
    path = tmp_path_factory.mktemp("rt") / ("r.json.gz" if gz else "r.json")
    loaded = load_report(save_report(report, path))
    assert loaded == report
    # valid columns take the fast path (no per-record validation), not pydantic's records
    assert build_layers(json.loads(report_text(report))["layers"]) is not None
    assert [r.model_dump() for r in loaded.layers] == [r.model_dump() for r in report.layers]


def _slow_path(document: dict[str, Any]) -> AnalysisReport:
    """What pydantic alone makes of a compact document: records expanded, then validated."""
    expanded = copy.deepcopy(document)
    expanded["layers"] = expand_layers(expanded["layers"])
    expanded["schema_version"] = SCHEMA_VERSION
    return AnalysisReport.model_validate(expanded)


def _number_paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _number_paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _number_paths(value, (*prefix, index))
    else:
        found.append(prefix)
    return found


VALUES = st.none() | st.booleans() | st.integers(-3, 2**64) | st.floats() | st.text(max_size=3)
COMPACT = _compact(REPORTS["analysis"])


@property_settings(ci_examples=150)
@given(st.data())
def test_damaged_columns_load_like_pydantic_or_fail_in_one_line(data: st.DataObject) -> None:
    """The fast path accepts exactly what pydantic accepts, with an equal report."""
    document = copy.deepcopy(COMPACT)
    leaves = [p for p in _number_paths(document["layers"]) if p]
    for _ in range(data.draw(st.integers(1, 2))):
        path = data.draw(st.sampled_from(leaves))
        parent = document["layers"]
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = data.draw(VALUES)
    try:
        expected: AnalysisReport | None = _slow_path(document)
    except ValueError:  # a LayoutError, or pydantic's ValidationError
        expected = None
    try:
        loaded = load_report(json.dumps(document))
    except ValueError as error:
        event("refused")
        assert expected is None and "\n" not in str(error)
        return
    event("accepted")
    assert loaded == expected
    assert all(isinstance(r, LayerRecord) for r in loaded.layers)  # type: ignore[union-attr]


FIELD_BY_FIELD = [json.loads(r.model_dump_json()) for r in REPORTS.values()]


def _like(value: Any) -> st.SearchStrategy[Any]:
    """A random value of the same JSON type (finite: strict JSON has no NaN to write)."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(0, 2**40)
    if isinstance(value, float):
        return st.floats(0, 1e12)
    if isinstance(value, str):
        return st.text(max_size=6)
    return st.none() | st.integers(0, 9) | st.text(max_size=3)


@property_settings(ci_examples=300)
@given(st.data())
def test_every_report_load_accepts_round_trips(data: st.DataObject) -> None:
    """Reports of every kind, varied at random (what load_report accepts of random changes to
    real reports): the compact form gives an equal report back, and the same bytes again."""
    document = copy.deepcopy(data.draw(st.sampled_from(FIELD_BY_FIELD)))
    leaves = [p for p in _number_paths(document) if p]
    for _ in range(data.draw(st.integers(0, 3))):
        path = data.draw(st.sampled_from(leaves))
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = data.draw(_like(parent[path[-1]]))
    try:
        report = load_report(json.dumps(document))
    except ValueError:
        event("refused (not a report; nothing to round-trip)")
        return
    event(f"accepted {report.kind}")
    text = report_text(report)
    loaded = load_report(text)
    assert loaded == report
    assert report_text(loaded) == text
