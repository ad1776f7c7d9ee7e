"""docs/pipeline.md's own-model recipe, as written: its module, its two YAML files, its commands.

The blocks are taken from the page (by their first-line file comments), written into a
scratch copy of conf/, made the default with the documented command, and a stage runs on
them under DVC's calling convention. The drift check stays green after the switch.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import clean_env

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(?:python|yaml)\n(# (\S+)\n.*?)^```", re.DOTALL | re.MULTILINE)


def documented_files() -> dict[str, str]:
    """{'mypkg/models.py': code, 'conf/model/mine.yaml': text, ...} from docs/pipeline.md."""
    page = (ROOT / "docs" / "pipeline.md").read_text(encoding="utf-8")
    return {match[2]: match[1] for match in FENCE.finditer(page)}


def test_the_own_model_recipe_parses_composes_and_runs(tmp_path: Path) -> None:
    files = documented_files()
    assert {"mypkg/models.py", "conf/model/mine.yaml", "conf/input/mine.yaml"} <= set(files)
    repo, src = tmp_path / "repo", tmp_path / "src"
    shutil.copytree(ROOT / "conf", repo / "conf")
    shutil.copy(ROOT / "params.yaml", repo / "params.yaml")
    (src / "mypkg").mkdir(parents=True)
    (src / "mypkg" / "__init__.py").write_text("")
    (src / "mypkg" / "models.py").write_text(files["mypkg/models.py"])
    for name in ("conf/model/mine.yaml", "conf/input/mine.yaml"):
        (repo / name).write_text(files[name])
    env = clean_env()
    env["PYTHONPATH"] = str(src)

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", *args], cwd=repo, env={**env, **extra},
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip

    compose = "torchscan_stages.pipeline.compose"
    switched = run(compose, "--set-default", "model=mine", "input=mine")
    assert switched.returncode == 0, switched.stderr
    assert "- model: mine" in (repo / "conf" / "config.yaml").read_text()
    assert run(compose, "--check").returncode == 0  # conf/ and params.yaml agree
    refused = run(compose, "model=cnn")  # a one-off override would break the drift check
    assert refused.returncode == 2 and "--set-default" in refused.stderr

    flops = run("torchscan_stages.stages.flops", DVC_STAGE="flops")
    assert flops.returncode == 0, flops.stderr[-2000:]
    assert flops.stdout.startswith("flops: total FLOPs ") and "(complete)" in flops.stdout
    metrics = json.loads((repo / "metrics" / "flops.json").read_text())
    # Linear(16, 64) and Linear(64, 4) on a batch of 32: 2*32*16*64 + 2*32*64*4 = 81,920
    assert metrics["product_flops"] == 81_920
    report = json.loads((repo / "reports" / "flops.json").read_text())
    assert report["provenance"]["run"]["model_name"] == "mine"
