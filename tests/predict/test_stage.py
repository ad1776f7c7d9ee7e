"""The pipeline's predict stage, run as DVC runs it: reading params.yaml in its folder.

The default config and the refusal run as a child process (``python -m``: exit code,
stderr); the variants (cast, FSDP2, DDP) go through the same entry, ``run_stage`` under
``DVC_STAGE``, in this process: a child would only import torch again for them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from torchscan_stages.report import PredictionReport, load_report

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, **predict: object) -> subprocess.CompletedProcess[str]:
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["predict"].update(predict)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    env = {**os.environ, "DVC_STAGE": "predict"}
    return subprocess.run(
        [sys.executable, "-m", "torchscan_stages.stages.predict"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _params(**predict: object) -> dict[str, Any]:
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["predict"].update(predict)
    return params


def _run_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, params: dict[str, Any]) -> None:
    """The stage as DVC starts it (``DVC_STAGE`` set, no arguments, params.yaml in the
    working folder), in this process; its exit status must be 0."""
    from torchscan_stages.pipeline.runner import run_stage
    from torchscan_stages.stages import predict

    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVC_STAGE", "predict")
    before = _torch_state()
    code = run_stage("predict", predict.KEYS, predict.run, argv=[], about="", writes=predict.WRITES)
    assert code == 0
    assert _torch_state() == before  # the stage leaves its process's torch settings as found


def _torch_state() -> tuple[object, ...]:
    import torch

    return (torch.get_default_dtype(), torch.get_num_threads(), torch.is_grad_enabled())


def test_stage_writes_a_prediction_report_and_metrics(tmp_path: Path) -> None:
    done = _run(tmp_path, mode="training", optimizer="adamw", device="cuda", capacity_bytes=2**30)
    assert done.returncode == 0, done.stderr
    report = load_report(tmp_path / "reports" / "predict.json")
    assert isinstance(report, PredictionReport)
    assert report.peak.status == "complete" and report.peak.method == "fake_tensor_prediction"
    assert report.ran_without_data and report.fits is True  # a few MiB against 1 GiB
    assert report.provenance.run is not None and report.provenance.run.stage == "predict"
    # not threads: a predicted peak does not depend on it (counting stages never read it)
    assert set(report.provenance.run.config) == {
        "model", "input", "device", "precision", "seed", "predict"
    }  # fmt: skip
    # the parameters at the peak are the configured model's, each in 512-byte blocks,
    # counted from a real build of the same config here
    from torchscan_stages.pipeline.schema import validate_config
    from torchscan_stages.pipeline.workload import build_model_and_inputs

    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    model, _, _ = build_model_and_inputs(validate_config(params))
    blocks = sum(-(-p.numel() * p.element_size() // 512) * 512 for p in model.parameters())
    assert report.by_category["parameters"].value == blocks
    assert "optimizer_step" in report.by_phase  # the AdamW step ran
    metrics = json.loads((tmp_path / "metrics" / "predict.json").read_text(encoding="utf-8"))
    assert metrics["predicted_peak_bytes"] == report.peak.value
    assert metrics["predicted_fits"] == 1
    # a training step's headline: the steady state (AdamW's moments held through it), and
    # the step builds everything inside, so nothing is resident
    assert report.headline == "steady_state_peak" and report.steady_state_peak is not None
    assert metrics["predicted_steady_state_bytes"] == report.steady_state_peak.value
    assert metrics["predicted_steady_state_bytes"] > metrics["predicted_peak_bytes"]
    assert metrics["predicted_resident_bytes"] == 0


def test_stage_refuses_a_bad_setting_naming_the_key(tmp_path: Path) -> None:
    done = _run(tmp_path, device="tpu")
    assert done.returncode == 2
    assert "predict.device" in done.stderr
    assert not (tmp_path / "reports").exists()


def test_stage_is_declared_with_exactly_its_params() -> None:
    from torchscan_stages.stages import predict

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    assert stages["predict"]["params"] == list(predict.KEYS)
    assert "reports/predict.json" in stages["render"]["deps"]


def test_stage_in_cast_bf16_builds_bf16_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    params = _params(mode="inference", device="cpu")
    params["precision"] = {"name": "bf16", "dtype": "bfloat16", "apply": "cast"}
    _run_here(tmp_path, monkeypatch, params)
    report = load_report(tmp_path / "reports" / "predict.json")
    assert isinstance(report, PredictionReport)
    from torchscan_stages.pipeline.schema import validate_config
    from torchscan_stages.pipeline.workload import build_model_and_inputs

    model, _, _ = build_model_and_inputs(validate_config(params))
    # 2 bytes per parameter in bf16, exact bytes on the CPU model
    assert report.by_category["parameters"].value == 2 * sum(p.numel() for p in model.parameters())


def test_stage_predicts_one_fsdp2_rank_and_a_batch_curve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run_here(tmp_path, monkeypatch, _params(
        device="cpu", sharding="fsdp2", world_size=4, batches=[1, 2, 4], capacity_bytes=2**30,
    ))  # fmt: skip
    report = load_report(tmp_path / "reports" / "predict.json")
    assert isinstance(report, PredictionReport)
    assert (report.world_size, report.rank, report.sharding) == (4, 0, "fsdp2")
    assert report.peak.status == "complete", report.diagnostics
    from torchscan_stages.pipeline.schema import validate_config
    from torchscan_stages.pipeline.workload import build_model_and_inputs

    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    model, _, _ = build_model_and_inputs(validate_config(params))
    # one rank holds ceil(rows / 4) rows of every fp32 parameter (FSDP2 pads dim 0)
    shard = sum(-(-p.shape[0] // 4) * (p.numel() // p.shape[0]) * 4 for p in model.parameters())
    assert report.by_category["parameters"].value == shard
    assert [point.batch for point in report.batch_curve] == [1, 2, 4]
    peaks = [point.peak.value for point in report.batch_curve]
    assert peaks == sorted(peaks) and peaks[0] < peaks[-1]  # activations grow with the batch
    metrics = json.loads((tmp_path / "metrics" / "predict.json").read_text(encoding="utf-8"))
    assert metrics["predicted_peak_bytes_batch_4"] == peaks[-1]
    assert metrics["predicted_fits_batch_4"] == 1  # a few MiB against 1 GiB


def test_stage_predicts_one_ddp_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _run_here(tmp_path, monkeypatch, _params(device="cpu", sharding="ddp", world_size=2))
    report = load_report(tmp_path / "reports" / "predict.json")
    assert isinstance(report, PredictionReport)
    assert (report.world_size, report.sharding) == (2, "ddp")
    assert report.peak.status == "complete", report.diagnostics
    from torchscan_stages.pipeline.schema import validate_config
    from torchscan_stages.pipeline.workload import build_model_and_inputs

    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    model, _, _ = build_model_and_inputs(validate_config(params))
    # the first step's one bucket: every fp32 parameter, flat
    assert report.by_category["gradient_buckets"].value == 4 * sum(
        p.numel() for p in model.parameters()
    )
