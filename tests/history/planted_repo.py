"""A generated repository with known steps in REAL stage reports, for the history tests.

A minimal DVC project: a copy of the package, a planted model (``planted.py``) and the
pipeline's env, crawl and memory stages. Commits that change the model are measured with
``dvc repro`` (real child processes, real torch); the others change only ``notes.txt``,
which no stage depends on, so their committed metrics and dvc.lock stay valid for them, as
after a ``dvc repro`` that ran nothing. Planted (``PLAN``), with the arithmetic in
``expected_peak`` / ``expected_parameters``:

* commit 6: hidden width 50 -> 65: tracked peak x1.3 exactly, parameters x1.299;
* commits 12-14: width 65 -> 78 at 12 (x1.2 peak), committed WITHOUT a repro at 12 and 13
  (stale: dvc.lock does not match), measured at 14; bisect must name 12;
* commit 19: the ReLU becomes a custom leaf module the crawl has no formula for (module
  FLOPs partial, so absent from the flat metrics), commit 20 undoes it;
* commit 25: the environment changes (the package version in the fingerprint).

Six ``dvc repro`` runs in all (commits 0, 6, 14, 19, 20, 25): 5-9 minutes measured on the
shared 2-core machine under load averages of 15-20.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from child_env import clean_env

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
COMMITS = 32
BATCH = 16
FEATURES = 64
CLASSES = 10


def planted_source(width: int, scratch: bool = False) -> str:
    act = "Scratch()" if scratch else "nn.ReLU()"
    return f'''"""The planted model of the history tests."""
import torch
from torch import nn


class Scratch(nn.Module):
    """A leaf module the crawl has no formula for (same output storage as a ReLU)."""

    def forward(self, x):
        return torch.relu(x)


def build(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear({FEATURES}, {width}), {act}, nn.Linear({width}, {CLASSES}))


def batch(batch_size: int = {BATCH}, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(batch_size, {FEATURES}, generator=generator),)
'''


# commit number -> (model settings, measured); commits not listed only touch notes.txt
PLAN: dict[int, tuple[dict[str, object], bool]] = {
    0: ({"width": 50}, True),
    6: ({"width": 65}, True),
    12: ({"width": 78}, False),  # stale: committed without a repro
    14: ({"width": 78}, True),
    19: ({"width": 78, "scratch": True}, True),
    20: ({"width": 78}, True),
}
ENV_CHANGE = 25


def expected_peak(width: int) -> int:
    """Tracked CPU peak: two live float32 activations of BATCH x width (4 bytes each)."""
    return 2 * BATCH * width * 4


def expected_parameters(width: int) -> int:
    """Linear(64, w) + Linear(w, 10): weights and biases."""
    return FEATURES * width + width + width * CLASSES + CLASSES


def child_env() -> dict[str, str]:
    """git and dvc children: the venv first on PATH, a fixed identity, the copy's package."""
    env = clean_env()
    env.pop("PYTHONPATH", None)  # cwd (the copy) provides torchscan_stages and planted
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@localhost", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@localhost", DVC_NO_ANALYTICS="1")  # fmt: skip
    return env


def sh(repo: Path, *cmd: str) -> str:
    done = subprocess.run(list(cmd), cwd=repo, env=child_env(), capture_output=True, text=True,
                          timeout=900, check=False)  # fmt: skip
    if done.returncode != 0:
        raise AssertionError(f"{cmd} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def _dvc_yaml() -> str:
    real = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    stages = {"env": real["env"]}
    if "sources" in real:  # the model's own source fingerprint, which crawl and memory read
        stages["sources"] = real["sources"]
    for name in ("crawl", "memory"):
        stage = real[name]
        stage["deps"] = [*stage["deps"], "planted.py"]
        stages[name] = stage
    return yaml.safe_dump({"stages": stages}, sort_keys=False)


def _params() -> str:
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["model"] = {"_target_": "planted.build", "name": "planted", "revision": "1",
                       "kwargs": {"seed": 0}}  # fmt: skip
    params["input"] = {"_target_": "planted.batch", "name": "planted", "revision": "1",
                       "kwargs": {"batch_size": BATCH, "seed": 0}, "work_units": BATCH,
                       "unit": "samples"}  # fmt: skip
    return yaml.safe_dump(params, sort_keys=False)


def _bump_version(repo: Path) -> None:
    path = repo / "torchscan_stages" / "_version.py"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('__version__ = "', '__version__ = "9.'), encoding="utf-8")


def build(repo: Path) -> list[str]:
    """Create the repository; returns the commit names, oldest first."""
    repo.mkdir(parents=True)
    shutil.copytree(ROOT / "torchscan_stages", repo / "torchscan_stages",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))  # fmt: skip
    (repo / "dvc.yaml").write_text(_dvc_yaml(), encoding="utf-8")
    (repo / "params.yaml").write_text(_params(), encoding="utf-8")
    (repo / ".dvcignore").write_text("__pycache__/\n*.pyc\n", encoding="utf-8")
    (repo / ".gitignore").write_text("__pycache__/\n", encoding="utf-8")
    sh(repo, "git", "init", "-q", "-b", "main")
    sh(repo, "dvc", "init", "-q")
    sh(repo, "dvc", "config", "core.analytics", "false")
    shas = []
    for number in range(COMMITS):
        (repo / "notes.txt").write_text(f"commit {number}\n", encoding="utf-8")
        if number == ENV_CHANGE:
            _bump_version(repo)
            sh(repo, "dvc", "repro", "-q")
        if number in PLAN:
            settings, measured = PLAN[number]
            (repo / "planted.py").write_text(planted_source(**settings), encoding="utf-8")  # type: ignore[arg-type]
            if measured:
                sh(repo, "dvc", "repro", "-q")
        sh(repo, "git", "add", "-A")
        sh(repo, "git", "commit", "-qm", f"commit {number}")
        shas.append(sh(repo, "git", "rev-parse", "HEAD").strip())
    return shas


if __name__ == "__main__":  # build one by hand: python tests/history/planted_repo.py DIR
    print("\n".join(build(Path(sys.argv[1]))))
