"""One commit recipe: the README, docs/pipeline.md, `make main` and the render stage agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from torchscan_stages.analysis.crawl import crawl_module
from torchscan_stages.pipeline.commit import PIPELINE_FILES, recipe_lines, recipe_text
from torchscan_stages.stages import render

ROOT = Path(__file__).resolve().parents[2]


def _block_after(text: str, marker: str) -> list[str]:
    start = text.index(marker) + len(marker)
    block = text[start:].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #")[0].rstrip() for line in block.splitlines() if line.strip()]


def test_the_recipe_adds_exactly_the_pipelines_files_never_conf() -> None:
    assert "conf" not in PIPELINE_FILES and not any(p.startswith("conf") for p in PIPELINE_FILES)
    assert recipe_lines() == [
        "git add dvc.lock params.yaml metrics plots reports/.gitignore",
        'git commit -m "Reproduce the pipeline"',
        ".venv/bin/dvc push",  # runs as printed in a new shell: no venv on PATH there
    ]


def test_readme_and_pipeline_doc_show_the_same_recipe() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert _block_after(readme, "### After a run: what to commit") == recipe_lines()
    doc = (ROOT / "docs" / "pipeline.md").read_text(encoding="utf-8")
    assert _block_after(doc, "## After a run: commit, push, compare")[:3] == recipe_lines()
    for text in (readme, doc):
        assert not re.search(r"git add [^\n]*\bconf\b", text)  # never `git add conf`


def test_make_main_prints_the_recipe_from_the_one_module() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    target = makefile.split("\nmain:", 1)[1].split("\n\n", 1)[0]
    assert "-m torchscan_stages.pipeline.commit" in target
    assert "git add" not in makefile  # no second copy to drift


def test_the_render_stage_ends_a_dvc_run_with_the_recipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    crawl_module(torch.nn.Linear(3, 2), (3,)).save(tmp_path / "crawl.json")
    monkeypatch.setenv("DVC_STAGE", "render")
    assert render.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.endswith(recipe_text() + "\n"), out
    monkeypatch.delenv("DVC_STAGE")
    assert render.main([str(tmp_path)]) == 0
    assert "to keep it" not in capsys.readouterr().out  # by hand: no commit advice
