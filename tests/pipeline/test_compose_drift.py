"""`dvc exp run -S` and conf/ agree: the drift check names the keys and both honest fixes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from child_env import clean_env

from torchscan_stages.pipeline.loader import compose_yaml

ROOT = Path(__file__).resolve().parents[2]


def _compose(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_env()
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "torchscan_stages.pipeline.compose", *args],
        cwd=repo, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_an_experiments_override_is_named_and_can_be_kept_through_conf(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "conf", repo / "conf")
    # what a workspace `dvc exp run -S threads=2` leaves: conf/ composed with the override
    (repo / "params.yaml").write_text(compose_yaml(["threads=2"], conf_dir=repo / "conf"))
    drift = _compose(repo, "--check")
    assert drift.returncode == 1
    message = drift.stderr
    assert message.count("\n") == 1  # one line
    assert "at threads (conf/: 1, params.yaml: 2)." in message
    assert "dvc exp run -S KEY=VALUE" in message and "--set-default GROUP=OPTION" in message
    assert "reverting those keys" in message  # the plain recompose says what it undoes
    # keep it: the documented path puts the value in conf/, then recomposes
    config = repo / "conf" / "config.yaml"
    config.write_text(config.read_text().replace("\nthreads: 1\n", "\nthreads: 2\n"))
    assert _compose(repo).returncode == 0
    assert _compose(repo, "--check").returncode == 0
    assert yaml.safe_load((repo / "params.yaml").read_text())["threads"] == 2


def test_a_group_choice_from_an_experiment_is_named_by_its_keys(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "conf", repo / "conf")
    overrides = ["model=transformer", "input=tokens"]
    (repo / "params.yaml").write_text(compose_yaml(overrides, conf_dir=repo / "conf"))
    message = _compose(repo, "--check").stderr
    assert "model.name (conf/: 'cnn', params.yaml: 'transformer')" in message
    switched = _compose(repo, "--set-default", "model=transformer", "input=tokens")
    assert switched.returncode == 0, switched.stderr
    assert _compose(repo, "--check").returncode == 0
