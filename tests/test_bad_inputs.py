"""The catalogue of docs/bad-input.md, run: each bad input gets its one-line error.

Every case id here is a row of docs/bad-input.md (tests/test_bad_input_doc.py checks that the
page cites only ids and tests that exist). A case calls the public API with one bad input
and asserts the exception type, a fragment of the message, and that the message is one line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from torchscan_stages import (
    ModuleHandler,
    compare_reports,
    crawl_module,
    load_report,
    measure_flops,
    measure_latency,
    measure_peak_memory,
    measure_peak_rss,
    measure_workload,
    profile_workload,
    render_report,
)
from torchscan_stages.measure.rss_phases import mark_phase
from torchscan_stages.provenance import build_provenance
from torchscan_stages.report import FlopReport, MetricResult

FLOPS = {"unit": "FLOPs", "scope": "operator", "method": "operator_dispatch"}


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU())


def _workload() -> Any:
    model = _model()
    return lambda: model(torch.randn(2, 4))


def _flops_json(**total: Any) -> str:
    document = json.loads(
        FlopReport(
            provenance=build_provenance(), total=MetricResult.complete(1, **FLOPS)
        ).model_dump_json()
    )
    document["total"].update(total)
    return json.dumps(document)


def _write(tmp: Path, name: str, data: bytes) -> Path:
    path = tmp / name
    path.write_bytes(data)
    return path


Case = tuple[str, Callable[[Path], Any], type[BaseException], str]
PY = sys.executable

API: list[Case] = [
    # crawl_module
    (
        "crawl-shape-str",
        lambda t: crawl_module(_model(), "abc"),
        TypeError,  # type: ignore[arg-type]
        "input_shape must be a tuple of ints",
    ),
    (
        "crawl-shape-negative",
        lambda t: crawl_module(_model(), (-1,)),
        ValueError,
        "input_shape has a negative dimension: (-1,)",
    ),
    (
        "crawl-shape-and-args",
        lambda t: crawl_module(_model(), (4,), args=(torch.ones(1, 4),)),
        ValueError,
        "pass either input_shape (generated inputs) or args",
    ),
    (
        "crawl-not-a-module",
        lambda t: crawl_module("model", (4,)),
        TypeError,  # type: ignore[arg-type]
        "module must be a torch.nn.Module, got str",
    ),
    (
        "crawl-mode",
        lambda t: crawl_module(_model(), (4,), mode="fast"),
        ValueError,
        "mode must be 'full' or 'structure', got 'fast'",
    ),
    (
        "crawl-dtype-str",
        lambda t: crawl_module(_model(), (4,), dtype="float"),
        TypeError,  # type: ignore[arg-type]
        "dtype must be a torch.dtype or a list of them, got 'float'",
    ),
    (
        "crawl-cuda-absent",
        lambda t: crawl_module(_model(), (4,), device="cuda"),
        ValueError,
        "device='cuda' was requested but CUDA is not available",
    ),
    (
        "crawl-handler-not-wrapped",
        lambda t: crawl_module(_model(), (4,), custom_modules={nn.Linear: lambda ctx: {}}),  # type: ignore[dict-item]
        TypeError,
        "custom_modules[Linear] must be a ModuleHandler, got function",
    ),
    (
        "crawl-mapping-str-key",
        lambda t: crawl_module(_model(), (4,), custom_mapping={"mm": len}),  # type: ignore[dict-item]
        TypeError,
        "custom_mapping key 'mm' (str) is not an operator",
    ),
    # measure_flops / memory / latency / profile / workload
    (
        "flops-not-callable",
        lambda t: measure_flops(3),
        TypeError,  # type: ignore[arg-type]
        "workload must be a zero-argument callable",
    ),
    (
        "memory-not-callable",
        lambda t: measure_peak_memory(None),
        TypeError,  # type: ignore[arg-type]
        "workload must be a zero-argument callable",
    ),
    (
        "device-unknown-type",
        lambda t: measure_peak_memory(_workload(), device="tpu"),
        ValueError,
        "device='tpu' is not a valid torch device string",
    ),
    (
        "device-cpu-index",
        lambda t: measure_peak_memory(_workload(), device="cpu:1"),
        ValueError,
        "device='cpu:1': the CPU has no device index 1",
    ),
    (
        "device-wrong-type",
        lambda t: measure_peak_memory(_workload(), device=3),
        TypeError,  # type: ignore[arg-type]
        "device must be a str such as 'cpu'",
    ),
    (
        "latency-work-units-nan",
        lambda t: measure_latency(_workload(), work_units=float("nan")),
        ValueError,
        "work_units must be a finite number > 0, got nan",
    ),
    (
        "latency-work-units-zero",
        lambda t: measure_latency(_workload(), work_units=0),
        ValueError,
        "work_units must be a finite number > 0, got 0",
    ),
    (
        "latency-warmup-negative",
        lambda t: measure_latency(
            _workload(),
            options={"warmup": -1},
        ),
        ValueError,
        "warmup must be finite and >= 0.0, got -1",
    ),
    (
        "latency-min-run-time-inf",
        lambda t: measure_latency(
            _workload(),
            options={"min_run_time": float("inf")},
        ),
        ValueError,
        "min_run_time must be finite",
    ),
    (
        "latency-max-run-time-inf",
        lambda t: measure_latency(
            _workload(),
            options={"max_run_time": float("inf")},
        ),
        ValueError,
        "max_run_time must be finite",
    ),
    (
        "latency-unit-empty",
        lambda t: measure_latency(_workload(), unit=""),
        ValueError,
        "unit must be a non-empty string",
    ),
    (
        "profile-row-limit",
        lambda t: profile_workload(_workload(), row_limit=0),
        ValueError,
        "row_limit must be an int >= 1, got 0",
    ),
    (
        "profile-sort-by",
        lambda t: profile_workload(_workload(), sort_by="time"),
        ValueError,
        "sort_by must be one of",
    ),
    (
        "profile-warmup-negative",
        lambda t: profile_workload(_workload(), warmup_calls=-1),
        ValueError,
        "warmup_calls must be an int >= 0, got -1",
    ),
    (
        "profile-trace-not-path",
        lambda t: profile_workload(_workload(), trace_path=3),
        TypeError,  # type: ignore[arg-type]
        "trace_path must be a path or None, got int",
    ),
    (
        "profile-trace-directory",
        lambda t: profile_workload(_workload(), trace_path=t),
        ValueError,
        "is a directory; name the trace file to write",
    ),
    (
        "profile-trace-under-file",
        lambda t: profile_workload(_workload(), trace_path=_write(t, "f", b"") / "trace.json"),
        ValueError,
        "is not a directory",
    ),
    (
        "workload-flag-not-bool",
        lambda t: measure_workload(_workload(), flops="yes"),
        TypeError,  # type: ignore[arg-type]
        "flops must be True or False, got 'yes'",
    ),
    # measure_peak_rss
    (
        "rss-shell-string",
        lambda t: measure_peak_rss("python -c pass"),
        TypeError,  # type: ignore[arg-type]
        "command must be a list of strings",
    ),
    ("rss-empty", lambda t: measure_peak_rss([]), ValueError, "command must not be empty"),
    (
        "rss-not-str",
        lambda t: measure_peak_rss([PY, 3]),
        TypeError,  # type: ignore[list-item]
        "command[1] must be a str, got int",
    ),
    (
        "rss-not-on-path",
        lambda t: measure_peak_rss(["no-such-program-xyz"]),
        ValueError,
        "command[0]='no-such-program-xyz' was not found on PATH",
    ),
    (
        "rss-not-executable",
        lambda t: measure_peak_rss([str(_write(t, "x.json", b"{}"))]),
        ValueError,
        "is not an executable file",
    ),
    (
        "rss-timeout-nan",
        lambda t: measure_peak_rss([PY, "-c", "pass"], timeout=float("nan")),
        ValueError,
        "timeout must be a finite number of seconds > 0, got nan",
    ),
    (
        "rss-interval-bool",
        lambda t: measure_peak_rss([PY, "-c", "pass"], sample_interval=True),
        TypeError,
        "sample_interval must be a number of seconds, got bool",
    ),
    (
        "rss-cwd-missing",
        lambda t: measure_peak_rss([PY, "-c", "pass"], cwd=t / "no"),
        ValueError,
        "is not an existing directory",
    ),
    (
        "rss-env-value",
        lambda t: measure_peak_rss([PY, "-c", "pass"], env={"A": 1}),
        TypeError,  # type: ignore[dict-item]
        "env['A'] must map str to str, got 1",
    ),
    (
        "rss-env-list",
        lambda t: measure_peak_rss([PY, "-c", "pass"], env=["A"]),
        TypeError,  # type: ignore[arg-type]
        "env must be a mapping of str to str or None, got list",
    ),
    (
        "mark-phase-empty",
        lambda t: mark_phase(""),
        ValueError,
        "mark_phase: name must be a non-empty one-line string",
    ),
    # comparison and rendering
    (
        "compare-benchmark",
        lambda t: compare_reports(measure_peak_memory(_workload()), crawl_module(_model(), (4,))),
        TypeError,
        "got a BenchmarkReport: timing and workload evidence are compared with",
    ),
    (
        "render-not-a-report",
        lambda t: render_report(3),
        TypeError,  # type: ignore[arg-type]
        "report_or_path must be a report model, a path or JSON text, got int",
    ),
    (
        "render-output-is-input",
        lambda t: render_report(p := crawl_module(_model(), (4,)).save(t / "a.json"), output=p),
        ValueError,
        "is one of the input reports; refusing to overwrite it",
    ),
    (
        "render-output-directory",
        lambda t: render_report(crawl_module(_model(), (4,)), output=t),
        ValueError,
        "is a directory; name the file to write",
    ),
]

REPORT_FILES: list[Case] = [
    ("report-directory", lambda t: load_report(t), ValueError, "is a directory, not a report file"),
    ("report-missing-file", lambda t: load_report(t / "no.json"), ValueError, "no report file at"),
    (
        "report-missing-text",
        lambda t: load_report("no/such.json"),
        ValueError,
        "is neither a JSON document nor an existing file",
    ),
    (
        "report-not-utf8",
        lambda t: load_report(_write(t, "l.json", b'{"a": "caf\xe9"}')),
        ValueError,
        "not UTF-8 text: byte 10",
    ),
    ("report-malformed", lambda t: load_report("{nope"), ValueError, "<text>: malformed JSON"),
    (
        "report-too-deep",
        lambda t: load_report("[" * 100_000 + "]" * 100_000),
        ValueError,
        "<text>: JSON nested too deeply to be a report",
    ),
    (
        "report-top-level-list",
        lambda t: load_report("[1, 2]"),
        ValueError,
        "top level is not an object",
    ),
    (
        "report-foreign",
        lambda t: load_report('{"name": "x"}'),
        ValueError,
        "no 'kind' and 'schema_version' fields",
    ),
    (
        "report-unknown-kind",
        lambda t: load_report('{"kind": "weather", "schema_version": 1}'),
        ValueError,
        "unknown report kind 'weather'",
    ),
    (
        "report-other-version",
        lambda t: load_report('{"kind": "flops", "schema_version": 0}'),
        ValueError,
        "unsupported schema_version 0 for kind 'flops'",
    ),
    (
        "report-bool-version",
        lambda t: load_report('{"kind": "flops", "schema_version": true}'),
        ValueError,
        "unsupported schema_version True",
    ),
    (
        "report-negative-flops",
        lambda t: load_report(_flops_json(value=-979, known_value=-979)),
        ValueError,
        "invalid flops report at total: Value error, MetricResult.value must be >= 0",
    ),
    (
        "report-string-number",
        lambda t: load_report(_flops_json(value="3", known_value="3")),
        ValueError,
        "invalid flops report at total.value",
    ),
    (
        "report-incoherent-status",
        lambda t: load_report(_flops_json(value=None)),
        ValueError,
        "a complete MetricResult needs both value and known_value",
    ),
    (
        "report-unknown-field",
        lambda t: load_report(_flops_json(colour="red")),
        ValueError,
        "invalid flops report at total.colour: Extra inputs are not permitted",
    ),
    (
        "report-not-a-path-type",
        lambda t: load_report(3),
        TypeError,  # type: ignore[arg-type]
        "load_report takes a path, JSON text or bytes, got int",
    ),
    (
        "report-name-too-long",
        lambda t: load_report("x" * 5000),
        ValueError,
        "is neither a JSON document nor an existing file",
    ),
]

ROOT = Path(__file__).resolve().parents[1]


def _config(edit: Callable[[dict[str, Any]], Any]) -> Any:
    """validate_config on params.yaml with one edit (the pipeline's own schema)."""
    import yaml

    from torchscan_stages.pipeline.schema import validate_config

    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    edit(params)
    return validate_config(params)


def _compose(overrides: list[str]) -> Any:
    """The pipeline's Hydra composition with overrides, as a stage or ``dvc exp run -S``."""
    from torchscan_stages.pipeline.loader import load_config

    return load_config(overrides, conf_dir=ROOT / "conf")


def _build(edit: Callable[[dict[str, Any]], Any]) -> Any:
    """build_workload on params.yaml with one edit: the factories the stages would call."""
    from torchscan_stages.pipeline.workload import build_workload

    return build_workload(_config(edit))


CONFIG: list[Case] = [
    (
        "config-seed-negative",
        lambda t: _config(lambda p: p.update(seed=-1)),
        ValueError,
        "seed = -1: input should be greater than or equal to 0",
    ),
    (
        "config-device-type",
        lambda t: _config(lambda p: p.update(device={"type": "tpu"})),
        ValueError,
        "device.type = 'tpu': input should be 'cpu' or 'cuda'",
    ),
    (
        "config-dtype",
        lambda t: _config(lambda p: p["precision"].update(dtype="float8")),
        ValueError,
        "precision.dtype = 'float8': input should be 'float32', 'bfloat16'",
    ),
    (
        "config-work-units-zero",
        lambda t: _config(lambda p: p["input"].update(work_units=0)),
        ValueError,
        "input.work_units = 0: input should be greater than 0",
    ),
    (
        "config-batch-size-zero",
        lambda t: _compose(["input.kwargs.batch_size=0"]),
        ValueError,
        "input.work_units = 0: input should be greater than 0",
    ),
    (
        # os.getcwd runs (as Hydra's instantiate would run it): only its result is refused
        "config-target-any-callable",
        lambda t: _build(
            lambda p: p.update(model={"_target_": "os.getcwd", "name": "cwd", "revision": "1"})
        ),
        ValueError,
        "model._target_ = 'os.getcwd': returned str, expected a torch.nn.Module",
    ),
]


def _hf(name: str, **kwargs: Any) -> Any:
    from torchscan_stages.integrations import hf_models

    return getattr(hf_models, name)(**kwargs)


INTEGRATIONS: list[Case] = [
    (
        "hf-model-class-mismatch",
        lambda t: _hf("build_hf_model", config_class="GPT2Config", model_class="BertModel"),
        ValueError,
        "model_class='BertModel' is built from a BertConfig, not from config_class='GPT2Config'",
    ),
    (
        "token-inputs-vocab-zero",
        lambda t: _hf("token_inputs", batch_size=1, seq_len=4, vocab_size=0),
        ValueError,
        "token_inputs: vocab_size must be an int >= 1, got 0",
    ),
    (
        "token-inputs-seq-negative",
        lambda t: _hf("token_inputs", batch_size=1, seq_len=-1, vocab_size=10),
        ValueError,
        "token_inputs: seq_len must be an int >= 0, got -1",
    ),
    (
        "hf-config-negative-count",
        lambda t: _hf("build_hf_model", config_class="GPT2Config", n_layer=-1, n_embd=8),
        ValueError,
        "GPT2Config.n_layer must be >= 0 (its default is 12), got -1",
    ),
]

WORKLOADS: list[Case] = [
    (
        "workload-needs-argument",
        lambda t: measure_flops(lambda x: x),
        TypeError,  # type: ignore[arg-type, misc]
        "missing 1 required positional argument: 'x'",
    ),
    (
        "latency-clock-not-a-number",
        lambda t: measure_latency(
            lambda: None,
            options={"clock": lambda: "now"},
        ),
        TypeError,
        "clock must return seconds as a number, such as time.perf_counter(); clock() returned "
        "'now' (str)",
    ),
]


def _predict(**options: Any) -> Any:
    from torchscan_stages.predict import predict_peak_memory

    return predict_peak_memory(lambda: torch.ones(2), **options)


def _per_rank(predictor: str, **options: Any) -> Any:
    import torchscan_stages

    return getattr(torchscan_stages, predictor)(lambda _: torch.ones(2), world_size=2, **options)


PREDICTION: list[Case] = [
    (
        "predict-device-index-text",
        lambda t: _predict(device="cuda:abc"),
        ValueError,
        "device='cuda:abc' is not a valid device string; predictions take 'cuda', 'cuda:N'",
    ),
    (
        "predict-device-index-negative",
        lambda t: _predict(device="cuda:-1"),
        ValueError,
        "device='cuda:-1' is not a valid device string",
    ),
    (
        "predict-device-cpu-index",
        lambda t: _predict(device="cpu:7"),
        ValueError,
        "device='cpu:7': the CPU has no device index 7",
    ),
    (
        "predict-name-not-str",
        lambda t: _predict(device="cpu", name=123),
        TypeError,
        "name must be a str or None, got int",
    ),
    (
        "predict-sharded-name-not-str",
        lambda t: _per_rank("predict_sharded_peak_memory", name=123),
        TypeError,
        "name must be a str or None, got int",
    ),
    (
        "predict-ddp-name-not-str",
        lambda t: _per_rank("predict_ddp_peak_memory", name=123),
        TypeError,
        "name must be a str or None, got int",
    ),
]

CASES = API + REPORT_FILES + CONFIG + INTEGRATIONS + WORKLOADS + PREDICTION


@pytest.mark.parametrize(
    ("call", "error", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input(
    tmp_path: Path, call: Callable[[Path], Any], error: type[BaseException], message: str
) -> None:
    if "CUDA is not available" in message and torch.cuda.is_available():
        pytest.skip("checks the error without a GPU")
    with pytest.raises(error) as caught:
        call(tmp_path)
    text = str(caught.value)
    assert message in text
    assert "\n" not in text, f"not one line: {text!r}"


def test_negative_handler_flops_never_give_a_complete_negative_total() -> None:
    """A ModuleHandler returning module_flops=-1000 once gave a complete total of -979."""
    handler = ModuleHandler(lambda ctx: {"module_flops": -1000})
    model = nn.Sequential(nn.Linear(4, 3))
    report = crawl_module(model, (4,), custom_modules={nn.Linear: handler})
    total = report.totals.module_flops
    assert total.status != "complete"
    assert total.known_value is None or total.known_value >= 0
    assert any(
        d.code == "handler_failed" and "must not be negative, got -1000" in d.message
        for d in report.diagnostics
    )


def test_config_targets_are_documented_as_code_the_owner_trusts() -> None:
    """`_target_` runs any importable callable (B[config-target-any-callable]); the pipeline
    page must say that params.yaml and `dvc exp run -S` values are code."""
    page = (ROOT / "docs" / "pipeline.md").read_text(encoding="utf-8")
    section = page.split("### Config values are code the owner trusts", 1)[1].split("\n## ", 1)[0]
    assert "`dvc exp run -S ...`" in section and "Nothing in the pipeline sandboxes" in section
