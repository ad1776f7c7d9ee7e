"""The serve stage on a causal LM's token streams (``serve=generate``), run in this process
as DVC starts it (``DVC_STAGE`` set, params.yaml in the working folder): TTFT, TPOT and
tokens/s in reports/serve.json and metrics/serve.json, the stream's prefill and decode FLOPs
beside them, and one-line refusals for a model or an input that cannot stream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("transformers", reason="the [hf] extra (transformers) is not installed")
pytest.importorskip("mlperf_loadgen", reason="the [serve] extra (LoadGen) is not installed")

from torchscan_stages.pipeline.loader import compose_yaml
from torchscan_stages.report import ServedReport, load_report

ROOT = Path(__file__).resolve().parents[2]
NEW = 8  # conf/serve/generate.yaml's max_new_tokens
PROMPT = 32  # conf/input/hf_tokens.yaml's seq_len


def _params(*overrides: str) -> dict[str, Any]:
    return yaml.safe_load(compose_yaml(list(overrides), conf_dir=ROOT / "conf"))


def _run_here(path: Path, monkeypatch: pytest.MonkeyPatch, params: dict[str, Any]) -> int:
    from torchscan_stages.pipeline.runner import run_stage
    from torchscan_stages.stages import serve

    path.mkdir(parents=True, exist_ok=True)
    (path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    with monkeypatch.context() as patch:
        patch.chdir(path)
        patch.setenv("DVC_STAGE", "serve")
        return run_stage("serve", serve.KEYS, serve.run, argv=[], writes=serve.WRITES)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    # the one override of the docs, made short: at least 6 requests (a complete p50)
    params = _params("serve=generate", "serve.duration_s=0.05", "serve.min_queries=6")
    folder = tmp_path_factory.mktemp("serve_generate")
    with pytest.MonkeyPatch.context() as patch:
        assert _run_here(folder, patch, params) == 0
    return folder, params


def test_serve_generate_reports_ttft_tpot_and_tokens_per_s(served: tuple[Path, Any]) -> None:
    folder, params = served
    assert params["model"]["name"] == "llama-tiny" and params["input"]["name"] == "hf_tokens"
    report = load_report(folder / "reports" / "serve.json")
    assert isinstance(report, ServedReport) and report.tokens is not None
    tokens = report.tokens
    assert report.requests >= 6 and report.samples == 2  # one prompt row per sample
    # every stream runs to max_new_tokens: 8 tokens per request, one TTFT and one TPOT each
    assert tokens.output_tokens == NEW * report.requests
    assert tokens.ttft.count == tokens.tpot.count == report.requests
    for result in (tokens.ttft.p50, tokens.tpot.p50, tokens.tokens_per_s):
        assert result.is_complete  # p50 is complete from 6 requests (0.5^6 <= 2.5%)
    # the aggregate rate is every output token over the run's span (arrival to last done)
    arrivals = report.arrivals_s
    span = max(a + t for a, t in zip(arrivals, report.latencies_s, strict=True)) - min(arrivals)
    assert tokens.tokens_per_s.value == pytest.approx(tokens.output_tokens / span, rel=1e-6)
    metrics = json.loads((folder / "metrics" / "serve.json").read_text(encoding="utf-8"))
    assert metrics["ttft_p50_s"] == tokens.ttft.p50.value
    assert metrics["tpot_p50_s"] == tokens.tpot.p50.value
    assert metrics["tokens_per_s"] == tokens.tokens_per_s.value


def test_the_streams_prefill_and_decode_flops_equal_generates_count(
    served: tuple[Path, Any],
) -> None:
    import torch

    from torchscan_stages import generation_cost
    from torchscan_stages.pipeline.schema import validate_config
    from torchscan_stages.pipeline.workload import build_workload

    folder, params = served
    metrics = json.loads((folder / "metrics" / "serve.json").read_text(encoding="utf-8"))
    built = build_workload(validate_config(params))
    prompt = built.kwargs["input_ids"][:1]  # the first row, the stream the stage counted
    ones = torch.ones_like(prompt)
    counted = generation_cost(
        built.model,
        lambda: built.model.generate(
            input_ids=prompt, attention_mask=ones, max_new_tokens=NEW, min_new_tokens=NEW,
            do_sample=False,
        ),
    )  # fmt: skip
    # the same forward calls as generate's, with the LM head on the last position only;
    # generate passes position_ids, the stream's forward derives them from the cache
    # position: one add per input token, 32 in the prefill and 1 per decode step
    assert metrics["prefill_flops"] == counted.prefill_flops.value + PROMPT
    assert metrics["decode_token_flops"] == counted.decode_flops_per_token.value + 1
    sidecar = json.loads((folder / "metrics" / "serve.evidence.json").read_text())
    assert sidecar["metrics"]["prefill_flops"]["status"] == "complete"
    report = load_report(folder / "reports" / "serve.json")
    (note,) = [d for d in report.diagnostics if d.code == "generation_cost"]
    assert f"{metrics['prefill_flops']:,.0f}" in note.message and note.severity == "info"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ("serve.max_new_tokens=4",),  # the default model: a CNN
            "serve.max_new_tokens = 4 serves token streams: model 'cnn' (SmallResNet) is not "
            "a causal language model",
        ),
        (
            ("serve=generate", "input=tokens"),  # positional ids, no input_ids keyword
            "serve.max_new_tokens needs token prompts (keyword input_ids",
        ),
    ],
)
def test_a_model_or_input_that_cannot_stream_is_refused_in_one_line(
    overrides: tuple[str, ...],
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    params = _params(*overrides)
    assert _run_here(tmp_path, monkeypatch, params) == 2  # a config error
    err = capsys.readouterr().err.strip()
    assert expected in err and "\n" not in err
    assert not (tmp_path / "reports").exists() and not (tmp_path / "metrics").exists()


def test_padded_prompts_are_refused() -> None:
    import types

    import torch

    from torchscan_stages.pipeline.schema import ConfigError
    from torchscan_stages.pipeline.serving import prompt_rows

    ids = torch.tensor([[5, 6, 7], [8, 9, 0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])  # the second prompt padded on the right
    built = types.SimpleNamespace(kwargs={"input_ids": ids, "attention_mask": mask})
    with pytest.raises(ConfigError, match="attention_mask pads some positions"):
        prompt_rows(built, "padded")  # type: ignore[arg-type]
    built.kwargs["attention_mask"] = torch.ones_like(ids)
    rows = prompt_rows(built, "unpadded")  # type: ignore[arg-type]
    assert [row.tolist() for row in rows] == [[5, 6, 7], [8, 9, 0]]  # one prompt per row
