"""Fast checks of the pipeline's config, loader, workload builder and wiring (no dvc runs)."""

from __future__ import annotations

import configparser
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from child_env import clean_env

from torchscan_stages.pipeline.loader import compose_yaml, load_config, read_params
from torchscan_stages.pipeline.schema import ConfigError, validate_config
from torchscan_stages.pipeline.workload import build_workload, thread_settings
from torchscan_stages.report import load_report
from torchscan_stages.report.fingerprint import EnvironmentReport

ROOT = Path(__file__).resolve().parents[2]
STAGES_WITH_PARAMS = ("crawl", "flops", "memory", "latency", "rss", "profile", "compare", "serve")


def _params() -> dict:
    return read_params(ROOT / "params.yaml")


def test_params_yaml_is_the_composition_of_conf() -> None:
    # Drift check: params.yaml must be exactly what `dvc exp run` would write from conf/.
    expected = compose_yaml(conf_dir=ROOT / "conf")
    assert (ROOT / "params.yaml").read_text(encoding="utf-8") == expected, (
        "params.yaml drifted from conf/; run `python -m torchscan_stages.pipeline.compose`"
    )


def test_committed_params_validate() -> None:
    config = validate_config(_params(), required=("candidate",))
    assert config.model.target == "torchscan_stages.zoo.small_resnet"
    assert config.input.work_units == 8  # batch_size 8 → 8 samples per call
    assert config.candidate.tolerance.required() == (0.05, 0.05)


def test_dvc_config_enables_hydra_and_disables_analytics() -> None:
    parser = configparser.ConfigParser()
    parser.read(ROOT / ".dvc" / "config")
    assert parser.get("hydra", "enabled").strip() == "true"
    assert parser.get("core", "analytics").strip() == "false"
    assert parser.get("core", "check_update").strip() == "false"
    ignore = (ROOT / ".dvcignore").read_text(encoding="utf-8")
    assert "__pycache__/" in ignore  # bytecode must never look like a changed package dep


def test_dvc_yaml_params_are_exactly_what_each_stage_reads() -> None:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    for name in STAGES_WITH_PARAMS:
        module = importlib.import_module(f"torchscan_stages.stages.{name}")
        assert stages[name]["params"] == list(module.KEYS), name
        assert "reports/env.json" in stages[name]["deps"], name
        assert "torchscan_stages" in stages[name]["deps"], name
    assert stages["env"]["always_changed"] is True
    assert "params" not in stages["env"] and "params" not in stages["render"]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda p: p.update(threads="two"), "threads = 'two'"),
        (lambda p: p.update(threads=0), "threads = 0: input should be greater than or equal to 1"),
        (lambda p: p["precision"].update(apply="cats"), "precision.apply = 'cats'"),
        (lambda p: p["model"].update(colour=1), "unknown key 'model.colour'; expected one of"),
        (lambda p: p.update(extra=1), "unknown key 'extra'"),
        (lambda p: p["latency"].pop("warmup"), "missing key 'latency.warmup'"),
        (lambda p: p["candidate"]["tolerance"].update(rtol=-1.0), "candidate.tolerance.rtol"),
    ],
)
def test_invalid_values_name_the_key_in_one_line(edit, expected: str) -> None:
    params = _params()
    edit(params)
    with pytest.raises(ConfigError) as caught:
        validate_config(params)
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_owner_tolerance_fails_only_where_required() -> None:
    params = _params()
    params["candidate"]["tolerance"]["rtol"] = "???"
    validate_config(params)  # a stage that does not read the candidate is not affected
    with pytest.raises(ConfigError, match=r"candidate\.tolerance\.rtol is required"):
        validate_config(params, required=("candidate",))


def test_hydra_compose_overrides_and_missing_tolerance() -> None:
    config = load_config(
        ["model=transformer", "input=tokens", "precision=bf16", "threads=2"],
        conf_dir=ROOT / "conf",
    )
    assert (config.model.name, config.input.name, config.threads) == ("transformer", "tokens", 2)
    assert (config.precision.dtype, config.precision.apply) == ("bfloat16", "autocast")
    # ~candidate.tolerance.rtol deletes the key; `null` / '???' must not pass either.
    with pytest.raises(ConfigError, match=r"candidate\.tolerance\.rtol"):
        load_config(
            ["candidate.tolerance.rtol=???"], conf_dir=ROOT / "conf", required=("candidate",)
        )


def test_workload_builder_baseline_and_candidates() -> None:
    config = validate_config(_params())
    baseline = build_workload(config)
    with thread_settings(1):
        out = baseline()
    assert out.shape == (8, 10)  # batch 8, num_classes 10
    assert out.dtype == torch.float32
    assert not torch.is_grad_enabled() or not out.requires_grad

    cast = config.model_copy(
        update={"precision": config.precision.model_copy(update={"dtype": "bfloat16"})}
    )
    assert build_workload(cast)().dtype == torch.bfloat16  # apply=cast converts the model

    channels_last = config.candidate.model_copy(update={"precision": None, "channels_last": True})
    candidate = build_workload(config, candidate=channels_last)
    assert candidate.inputs[0].is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(candidate(), out, rtol=1e-4, atol=1e-5)

    inference = config.candidate.model_copy(update={"precision": None, "inference_mode": True})
    assert build_workload(config, candidate=inference)().is_inference()


def test_thread_settings_restores() -> None:
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), thread_settings(1):
        assert torch.get_num_threads() == 1
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before


def test_unknown_model_target_names_the_key() -> None:
    params = _params()
    params["model"]["_target_"] = "torchscan_stages.zoo.no_such_model"
    with pytest.raises(ConfigError, match=r"model\._target_ = 'torchscan_stages\.zoo\.no_such"):
        build_workload(validate_config(params))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without a GPU")
def test_cuda_without_gpu_is_a_clear_error() -> None:
    params = _params()
    params["device"] = {"type": "cuda", "index": 0}
    with pytest.raises(
        ConfigError,
        match=r"device\.type = 'cuda': device='cuda:0' was requested but CUDA is not available",
    ):
        build_workload(validate_config(params))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
def test_cuda_workload_runs_on_the_gpu() -> None:
    params = _params()
    params["device"] = {"type": "cuda", "index": 0}
    workload = build_workload(validate_config(params))
    assert workload().device.type == "cuda"


def _run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def test_package_and_env_stage_import_neither_torch_nor_dvc_nor_hydra(tmp_path: Path) -> None:
    # Run from the repository root, as DVC does, so the package's own __init__ is imported.
    # The env stage runs on every `dvc repro`: importing torch there costs ~1.3 s a repro.
    target = tmp_path / "reports" / "env.json"
    code = (
        "import sys, torchscan_stages.stages.env as env\n"
        f"env.main([{str(target)!r}])\n"
        "print(sorted(m for m in ('torch', 'dvc', 'hydra', 'omegaconf') if m in sys.modules))\n"
    )
    assert _run_python(code, ROOT).stdout.strip() == "[]"
    first = target.read_bytes()
    _run_python(code, ROOT)
    assert target.read_bytes() == first  # byte-identical when nothing changed
    document = load_report(first)
    assert isinstance(document, EnvironmentReport)
    assert len(document.provenance.env_hash) == 16 and document.provenance.torch_version


def test_stage_under_dvc_does_not_import_hydra_or_dvc(tmp_path: Path) -> None:
    # The fixed overhead of a stage: params.yaml read with PyYAML, hydra never imported.
    (tmp_path / "params.yaml").write_text(
        (ROOT / "params.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    code = (
        "import os, sys\nos.environ['DVC_STAGE'] = 'flops'\n"
        "from torchscan_stages.pipeline.runner import run_stage\n"
        "seen = {}\n"
        "def body(ctx):\n"
        "    seen['model'] = ctx.config.model.name\n"
        "    seen['config_keys'] = sorted(ctx.run.config)\n"
        "assert run_stage('flops', ('model', 'seed'), body, []) == 0\n"
        "print(seen, sorted(m for m in ('dvc', 'hydra', 'omegaconf') if m in sys.modules))\n"
    )
    result_line, out = _run_python(code, tmp_path).stdout.strip().splitlines()
    assert out == "{'model': 'cnn', 'config_keys': ['model', 'seed']} []"
    assert result_line == "flops: no headline numbers -> wrote nothing"  # the body wrote none


def test_rss_child_rebuilds_the_same_config(tmp_path: Path) -> None:
    config = validate_config(_params())
    payload = json.dumps(config.model_dump(mode="json", by_alias=True))
    result = subprocess.run(
        [sys.executable, "-m", "torchscan_stages.pipeline.rss_child", payload],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TORCHSCAN_STAGES_RSS_PHASE_FILE": str(tmp_path / "phases.jsonl")},
    )
    assert result.returncode == 0, result.stderr
    lines = (tmp_path / "phases.jsonl").read_text(encoding="utf-8").splitlines()
    phases = [json.loads(line)["name"] for line in lines]
    assert phases == ["import", "build", "execute"]


# --- bad input: one line naming the problem, nothing lost -----------------------------


def _stage_env(**extra: str) -> dict[str, str]:
    return clean_env(**extra)


def test_latency_max_run_time_inf_is_refused_naming_the_key() -> None:
    params = _params()
    params["latency"]["max_run_time"] = float("inf")  # YAML `.inf`
    with pytest.raises(ConfigError) as caught:
        validate_config(params)
    assert str(caught.value) == (
        "invalid config: latency.max_run_time = inf: input should be a finite number"
    )


def test_seed_2_pow_70_is_refused_naming_the_key() -> None:
    params = _params()
    params["seed"] = 2**70  # torch.manual_seed takes at most 64 bits
    with pytest.raises(ConfigError) as caught:
        validate_config(params)
    # 2**70 = 1180591620717411303424; the limit is 2**63 - 1 = 9223372036854775807
    assert "seed = 1180591620717411303424: input should be less than or equal to " in str(
        caught.value
    )
    assert str(caught.value).endswith("9223372036854775807")


def test_typo_latency_warmpu_names_the_misspelt_key_and_the_close_match() -> None:
    params = _params()
    params["latency"]["warmpu"] = params["latency"].pop("warmup")
    with pytest.raises(ConfigError) as caught:
        validate_config(params)
    message = str(caught.value)
    assert message.startswith("invalid config: unknown key 'latency.warmpu'")
    assert "(did you mean 'warmup'?)" in message and "\n" not in message


def test_non_utf8_params_yaml_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_bytes(b"threads: 1\nseed: \xff\n")  # Latin-1 byte, invalid UTF-8
    with pytest.raises(ConfigError) as caught:
        read_params(path)
    # "threads: 1\nseed: " is 17 bytes, so the bad byte sits at offset 17
    assert str(caught.value) == f"{path}: not UTF-8 text (byte 0xff at offset 17); save it as UTF-8"


def test_factory_kwargs_typo_refused_by_the_signature() -> None:
    params = _params()
    params["input"] = {
        "_target_": "torchscan_stages.integrations.hf_models.token_inputs",
        "name": "tokens", "revision": "1", "work_units": 2, "unit": "sequences",
        "kwargs": {"batch_size": 2, "seq_lne": 8, "vocab_size": 10},  # typo of seq_len
    }  # fmt: skip
    with pytest.raises(ConfigError) as caught:
        build_workload(validate_config(params))
    assert str(caught.value) == (
        "input.kwargs.seq_lne: torchscan_stages.integrations.hf_models.token_inputs has no "
        "parameter 'seq_lne' (did you mean 'seq_len'?); it takes batch_size, seq_len, "
        "vocab_size, seed"
    )


def test_factory_kwargs_typo_through_var_kwargs_of_an_embedded_model() -> None:
    params = _params()
    params["model"]["kwargs"]["widht"] = 16  # small_resnet(**kwargs) passes it on
    with pytest.raises(ConfigError) as caught:
        build_workload(validate_config(params))
    assert "unexpected keyword argument 'widht'" in str(caught.value)
    assert "'widht'" in str(caught.value).split("keys ")[1]  # listed as unchecked


def test_factory_kwargs_typo_hidden_by_var_kwargs_names_the_unchecked_keys() -> None:
    params = _params()
    params["model"] = {
        "_target_": "torchscan_stages.integrations.hf_models.build_hf_model",
        "name": "gpt2",
        "revision": "1",
        "kwargs": {"config_class": "GPT2Config", "n_layr": 1},  # typo of n_layer
    }
    with pytest.raises(ConfigError) as caught:
        build_workload(validate_config(params))
    message = str(caught.value)
    assert message.startswith("model.kwargs: torchscan_stages.integrations.hf_models.build_hf_")
    assert "n_layr" in message and "keys ['n_layr'] reach its **kwargs unchecked" in message
    assert "\n" not in message


def test_hf_token_inputs_are_passed_as_keyword_arguments() -> None:
    config = load_config(["model=bert", "input=hf_tokens"], conf_dir=ROOT / "conf")
    workload = build_workload(config)
    assert workload.inputs == () and sorted(workload.kwargs) == ["attention_mask", "input_ids"]
    assert workload.kwargs["input_ids"].shape == (2, 32)  # batch_size 2, seq_len 32
    hidden = workload()["last_hidden_state"]
    assert hidden.shape == (2, 32, 64)  # batch 2, 32 tokens, hidden_size 64


@pytest.mark.parametrize("stage", ["latency", "crawl", "rss"])
def test_stage_run_as_a_file_hints_python_m(stage: str) -> None:
    done = subprocess.run(
        [sys.executable, f"torchscan_stages/stages/{stage}.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == (
        f"torchscan_stages/stages/{stage}.py is part of a package; run it as a module: "
        f"python -m torchscan_stages.stages.{stage}\n"
    )


def test_stage_help_says_what_it_measures_reads_and_writes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "torchscan_stages.stages.latency", "--help"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.startswith("usage: python -m torchscan_stages.stages.latency")
    assert "Measures: one first call" in done.stdout
    assert "reads:  params.yaml keys model, input, device, precision, threads, seed" in done.stdout
    assert (
        "writes: reports/latency.json, metrics/latency.json, metrics/latency.evidence.json, plots/"
        in (done.stdout)
    )
    assert "hydra" not in done.stdout.split("\n")[0]  # not Hydra's config dump


def test_unwritable_metrics_leaves_no_new_report_beside_old_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchscan_stages.pipeline.runner import run_stage

    (tmp_path / "params.yaml").write_text(
        (ROOT / "params.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "flops.json").write_text("old report\n")
    (tmp_path / "metrics").write_text("a file where the metrics folder should be\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVC_STAGE", "flops")

    from torchscan_stages.provenance import build_provenance
    from torchscan_stages.report import FlopReport, MetricResult

    total = MetricResult.complete(1, unit="FLOPs", scope="forward", method="operator_dispatch")
    doc = FlopReport(provenance=build_provenance(), total=total)

    def body(ctx) -> None:  # type: ignore[no-untyped-def]
        ctx.write_report(doc)
        ctx.write_metrics({"total_flops": 1})

    assert run_stage("flops", ("model",), body, []) == 1
    assert (tmp_path / "reports" / "flops.json").read_text() == "old report\n"  # not replaced
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["flops.json"]  # no .tmp


@pytest.mark.slow
def test_rss_stage_passes_a_200kb_config_through_a_file(tmp_path: Path) -> None:
    (tmp_path / "bigpkg.py").write_text(
        "import torch\n\n"
        "def build(seed=0, blob=''):\n"
        "    assert len(blob) == 200_000\n"
        "    return torch.nn.Linear(4, 2)\n\n"
        "def batch(seed=0):\n"
        "    return torch.ones(1, 4)\n"
    )
    params = _params()
    params["model"] = {"_target_": "bigpkg.build", "name": "big", "revision": "1",
                       "kwargs": {"seed": 0, "blob": "x" * 200_000}}  # fmt: skip
    params["input"] = {"_target_": "bigpkg.batch", "name": "one", "revision": "1",
                       "kwargs": {}, "work_units": 1, "unit": "samples"}  # fmt: skip
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "torchscan_stages.stages.rss"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env=_stage_env(DVC_STAGE="rss", PYTHONPATH=str(tmp_path)),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("rss: peak RSS ") and "(complete)" in done.stdout
    report = json.loads((tmp_path / "reports" / "rss.json").read_text())
    assert report["rss"]["exit_code"] == 0 and report["rss"]["peak"]["status"] == "complete"
    assert "--config-file" in report["rss"]["command"]  # not 200 KB of argv


def test_render_stage_help_and_an_empty_folder(tmp_path: Path) -> None:
    def render(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "torchscan_stages.stages.render", *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    shown = render("--help")
    assert shown.returncode == 0 and shown.stdout.startswith("usage: ")
    assert "Writes: FOLDER/index.html" in shown.stdout  # not "no reports under --help"
    empty = render("nothing")
    assert empty.returncode == 2
    assert empty.stderr.startswith("render: no reports under nothing/ (expected any of crawl")


def test_package_main_without_a_command_fails_with_usage() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "torchscan_stages"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("usage: python -m torchscan_stages COMMAND")
