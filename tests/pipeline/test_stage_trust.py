"""Stages record what was measured, clean up on signals, and fail in one line."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from child_env import clean_env
from signal_defaults import python_sigint

from torchscan_stages.measure.rss import measure_peak_rss
from torchscan_stages.pipeline.loader import read_params
from torchscan_stages.pipeline.schema import validate_config
from torchscan_stages.pipeline.workload import thread_settings
from torchscan_stages.stages.rss import child_command, child_execution

ROOT = Path(__file__).resolve().parents[2]


def _config_file(tmp_path: Path, threads: int) -> Path:
    params = read_params(ROOT / "params.yaml")
    params["threads"] = threads
    config = validate_config(params)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config.model_dump(mode="json", by_alias=True)), encoding="utf-8")
    return path


@pytest.mark.skipif(os.cpu_count() == 1, reason="needs 2 threads to tell parent from child")
def test_rss_report_records_the_childs_applied_threads(tmp_path: Path) -> None:
    config, execution = _config_file(tmp_path, threads=1), tmp_path / "execution.json"
    with thread_settings(2):  # the measuring process runs 2 threads, the child applies 1
        report = measure_peak_rss(child_command(config, execution), timeout=300)
        child_execution(report, execution)
    assert report.rss is not None and report.rss.exit_code == 0
    assert report.execution.num_threads == 1  # the child's, once the parent's 2
    assert not any(d.code == "child_execution_unknown" for d in report.diagnostics)


def test_rss_report_says_when_the_child_reported_no_threads(tmp_path: Path) -> None:
    report = measure_peak_rss([sys.executable, "-c", "pass"], timeout=60)
    child_execution(report, tmp_path / "never-written.json")
    assert report.execution.num_threads == torch.get_num_threads()  # unchanged, and said so
    (unknown,) = [d for d in report.diagnostics if d.code == "child_execution_unknown"]
    assert "not the measured child's" in unknown.message


def _stage_env(**extra: str) -> dict[str, str]:
    return clean_env(**extra)


# The signal arrives mid-write, deterministically: the first fsync of a temporary output
# (written, not yet renamed) sends it to this very process.
KILL_IN_WRITE = """
import os, signal, sys
real_fsync = os.fsync
def fsync(fd):
    os.kill(os.getpid(), signal.{sig})
    real_fsync(fd)
os.fsync = fsync
from torchscan_stages.pipeline.runner import stage_main
from torchscan_stages.stages import crawl
stage_main("crawl", crawl.KEYS, crawl.run, writes=crawl.WRITES)
"""


@pytest.mark.parametrize(("sig", "code"), [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_during_a_stage_write_leaves_no_temporary(
    tmp_path: Path, sig: str, code: int
) -> None:
    import subprocess

    import yaml

    (tmp_path / "params.yaml").write_text(
        yaml.safe_dump(read_params(ROOT / "params.yaml")), encoding="utf-8"
    )
    with python_sigint():  # the child starts with Ctrl-C's default, not an inherited SIG_IGN
        done = subprocess.run(
            [sys.executable, "-c", KILL_IN_WRITE.format(sig=sig)],
            cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
            env=_stage_env(DVC_STAGE="crawl", PYTHONPATH=str(ROOT)),
        )  # fmt: skip
    assert done.returncode == code, done.stderr[-2000:]  # 128 + 15, 128 + 2
    assert done.stderr.startswith(f"crawl: interrupted by {sig}")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["params.yaml"], left  # no report, no metrics, no .NAME.XXXX.tmp


def test_a_model_and_input_that_do_not_fit_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from torchscan_stages.pipeline.loader import compose_yaml
    from torchscan_stages.pipeline.runner import run_stage
    from torchscan_stages.stages import crawl

    # model=gpt2 input=image: image floats into GPT-2's embedding (once a 40-line traceback)
    text = compose_yaml(["model=gpt2", "input=image"], conf_dir=ROOT / "conf")
    (tmp_path / "params.yaml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVC_STAGE", "crawl")
    monkeypatch.delenv("TORCHSCAN_STAGES_TRACEBACK", raising=False)
    assert run_stage("crawl", crawl.KEYS, crawl.run, argv=[]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("crawl: the workload failed: model 'gpt2-tiny' (")
    assert "on input 'image' (torchscan_stages.zoo.image_batch) raised RuntimeError" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]  # nothing written


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda p: p["input"]["kwargs"].update(batch_size=-2),
            "input.kwargs: torchscan_stages.zoo.image_batch refused them (RuntimeError: Trying "
            "to create tensor with negative dimension -2",
        ),
        (
            lambda p: p["model"]["kwargs"].update(width=-1),
            "called as torchscan_stages.zoo.small_resnet(seed=0, width=-1, num_classes=10)",
        ),
        (
            lambda p: p["model"].update(_target_="torchscan_stages.zoo"),
            "model._target_ = 'torchscan_stages.zoo': 'torchscan_stages.zoo' is a module, not a "
            "callable; name a factory in it",
        ),
        (
            lambda p: p["model"].update(_target_="builtins.exit", kwargs={}),
            "model.kwargs: builtins.exit refused them (SystemExit: None; called as "
            "builtins.exit())",
        ),
    ],
    ids=["batch-size-negative", "factory-raises", "target-is-a-module", "factory-exits"],
)
def test_factory_failures_are_one_config_error(edit: Any, expected: str) -> None:
    from torchscan_stages.pipeline.schema import ConfigError
    from torchscan_stages.pipeline.workload import build_workload

    params = read_params(ROOT / "params.yaml")
    edit(params)
    with pytest.raises(ConfigError) as caught:
        build_workload(validate_config(params))
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_threads_beyond_the_host_are_a_config_error() -> None:
    from torchscan_stages.pipeline.schema import ConfigError
    from torchscan_stages.pipeline.workload import usable_cpus

    before = torch.get_num_threads()
    with pytest.raises(ConfigError) as caught, thread_settings(2147483648):
        pass
    assert f"threads = 2147483648: this host can run at most {usable_cpus()}" in str(caught.value)
    assert torch.get_num_threads() == before  # nothing applied


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"kind": "analysis", "schema', "crawl.json: malformed JSON"),  # truncated
        ('{"kind": "flops", "schema_version": 1}', "crawl.json: invalid flops report"),
    ],
    ids=["truncated", "invalid"],
)
def test_render_stage_on_a_bad_report_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    from torchscan_stages.stages.render import main

    (tmp_path / "crawl.json").write_text(text, encoding="utf-8")
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and "index.html was not written" in err
    assert not (tmp_path / "index.html").exists()


def test_render_stage_on_a_full_disk_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from torchscan_stages import crawl_module
    from torchscan_stages.stages.render import main
    from torchscan_stages.zoo import small_resnet

    crawl_module(small_resnet(), (3, 8, 8)).save(tmp_path / "crawl.json")

    def full(fd: int) -> None:  # the disk fills while the page is written
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    assert main([str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"render: cannot write {tmp_path}/index.html: No space left on device")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["crawl.json"]  # no page, no .tmp


def test_render_stage_by_hand_without_crawl_json_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from torchscan_stages import measure_flops
    from torchscan_stages.stages.render import ORDER, main

    model = torch.nn.Linear(3, 2)
    measure_flops(lambda: model(torch.ones(1, 3))).save(tmp_path / "flops.json")
    assert main([str(tmp_path)]) == 0  # the page is made, without the crawl section ...
    out = capsys.readouterr().out
    # ... and the stage says which reports it did not find: every one of ORDER but flops
    missing = ", ".join(f"{name}.json" for name in ORDER if name != "flops")
    assert f"render: no {missing} under {tmp_path}/: the page leaves those sections out" in out
    assert out.index("render: no crawl.json") < out.index("wrote")
