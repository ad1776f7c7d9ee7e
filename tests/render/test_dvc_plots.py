"""`dvc plots diff` between two revisions with different models, drawn in headless Chromium.

DVC's ``bar_horizontal`` template put both revisions' layer names on one
axis (41 names of two models on a 300 px axis, labels 7 px apart and 11 px high). The
project's ``layers_by_revision`` template (``.dvc/plots/``) gives each revision its own panel
and layer axis, 16 px a layer, in forward order. The test builds a small DVC repository in a
temporary folder with the project's plot definition and template (never the checkout), puts
real crawls of a CNN on ``main`` and of an MLP in the workspace, runs ``dvc plots diff main``
and reads the drawn axes back (vega-embed again with the SVG renderer, so text has boxes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml
from chromium import CHROMIUM, SKIP_REASON, measure
from torch import nn

from torchscan_stages.analysis.crawl import crawl_module
from torchscan_stages.stages.crawl import layer_flops_rows

ROOT = Path(__file__).resolve().parents[2]
DVC = shutil.which("dvc", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
PLOT = "plots/layer_flops.json"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON),
    pytest.mark.skipif(DVC is None, reason="dvc not installed"),
]

# per y axis (one per panel): its labels with their boxes, in drawing order
AXES = """
var holder = document.createElement("div"); document.body.appendChild(holder);
return vegaEmbed(holder, SPEC, {renderer: "svg", actions: false}).then(function () {
  var axes = holder.querySelectorAll("g.role-axis");
  return Array.prototype.filter.call(axes, function (a) {
    return (a.getAttribute("aria-label") || "").indexOf("Y-axis") === 0;
  }).map(function (a) {
    return Array.prototype.map.call(a.querySelectorAll("g.role-axis-label text"), function (t) {
      var r = t.getBoundingClientRect(); return [t.textContent, r.top, r.bottom]; });
  });
});
"""


def _sh(repo: Path, *command: str) -> None:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}  # fmt: skip
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{command}: {done.stdout[-2000:]}{done.stderr[-2000:]}"


def _repo(tmp_path: Path, rows_main: list[Any], rows_workspace: list[Any]) -> Path:
    """A git + DVC repository with the project's layer plot, ``main`` and a changed workspace."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _sh(repo, "git", "init", "-q", "-b", "main")
    _sh(repo, str(DVC), "init", "-q")
    plots = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["plots"]
    layer = [entry for entry in plots if PLOT in entry]
    (repo / "dvc.yaml").write_text(yaml.safe_dump({"plots": layer}), encoding="utf-8")
    shutil.copytree(ROOT / ".dvc" / "plots", repo / ".dvc" / "plots", dirs_exist_ok=True)
    config = "[core]\n    analytics = false\n[plots]\n    html_template = plots/offline.html\n"
    (repo / ".dvc" / "config").write_text(config, encoding="utf-8")
    (repo / "plots").mkdir()
    (repo / PLOT).write_text(json.dumps(rows_main), encoding="utf-8")
    _sh(repo, "git", "add", "-A")
    _sh(repo, "git", "commit", "-q", "-m", "cnn")
    (repo / PLOT).write_text(json.dumps(rows_workspace), encoding="utf-8")
    return repo


def _spec(page: str) -> str:
    """The vega-lite spec DVC wrote for the layer plot (JSON text)."""
    start = page.index("var spec = ", page.index('<div id = "plots_layer_flops_json">')) + 11
    return page[start : page.index("vegaEmbed(", start)].strip().rstrip(";")


def test_plots_diff_gives_each_revision_its_own_readable_layer_axis(tmp_path: Path) -> None:
    # CNN: 2 + 12 convs/ReLU ... = 17 leaf calls; MLP: 8 blocks x (Linear, GELU, Linear) = 24
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                        *[nn.Conv2d(8, 8, 3, padding=1) for _ in range(12)],
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))  # fmt: skip
    mlp = nn.Sequential(*[nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
                          for _ in range(8)])  # fmt: skip
    rows_cnn = layer_flops_rows(crawl_module(cnn, (3, 16, 16)))
    rows_mlp = layer_flops_rows(crawl_module(mlp, (64,)))
    assert (len(rows_cnn), len(rows_mlp)) == (17, 24)
    repo = _repo(tmp_path, rows_cnn, rows_mlp)
    out = tmp_path / "diff"
    _sh(repo, str(DVC), "plots", "diff", "main", "-o", str(out))
    page = out / "index.html"
    spec = json.loads(_spec(page.read_text(encoding="utf-8")))
    assert spec.get("resolve", {}).get("scale", {}).get("y") == "independent"
    assert spec.get("facet", {}).get("row", {}).get("field") == "rev"  # a panel per revision
    axes = measure(page, tmp_path / "work", AXES.replace("SPEC", _spec(page.read_text())),
                   wait_ms=15000)  # fmt: skip
    # one axis per revision (workspace first, as DVC orders them), each with only its model's
    # layers, in forward order: no union of two models' names on one axis
    assert [[label for label, _, _ in axis] for axis in axes] == [
        [row["layer"] for row in rows_mlp],
        [row["layer"] for row in rows_cnn],
    ]
    for axis in axes:  # every label clear of the next: 16 px a layer, 11 px labels
        gaps = [after[1] - before[2] for before, after in pairwise(axis)]
        assert min(gaps) >= 0, f"overlapping layer labels: {min(gaps)} px"
