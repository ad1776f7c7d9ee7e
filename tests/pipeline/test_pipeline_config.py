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

from torchscan_stages.pipeline.loader import compose_yaml, load_config, read_params
from torchscan_stages.pipeline.schema import ConfigError, validate_config
from torchscan_stages.pipeline.workload import build_workload, thread_settings

ROOT = Path(__file__).resolve().parents[2]
STAGES_WITH_PARAMS = ("crawl", "flops", "memory", "latency", "rss", "profile", "compare")


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
    with pytest.raises(ConfigError, match=r"device\.type = 'cuda': no CUDA device"):
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
    document = json.loads(first)
    assert len(document["env_hash"]) == 16 and "torch_version" in document["fingerprint"]


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
    out = _run_python(code, tmp_path).stdout.strip()
    assert out == "{'model': 'cnn', 'config_keys': ['model', 'seed']} []"


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
