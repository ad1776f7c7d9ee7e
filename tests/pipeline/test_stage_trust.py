"""Stages record what was measured, clean up on signals, and fail in one line (issue 27)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

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
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DVC_", "TORCHSCAN_"))}
    env.update(extra)
    return env


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
