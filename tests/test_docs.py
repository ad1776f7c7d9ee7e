"""Documentation code runs: every bash, YAML and Python block of README.md and docs/*.md.

Python blocks of a page run in order, as written, in one namespace (in a scratch folder).
YAML blocks must parse; bash blocks must parse (``bash -n``), and the ones a pipeline test
runs say so. A block that cannot run here is preceded by a marker that says why:

    <!-- docs-test: skip <reason> -->      (the block is still parsed)
    <!-- docs-test: run in <test name> --> (another test executes it; parsed here)
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from dynamo_counters import dynamo_counters_as_found

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md")], key=lambda p: p.relative_to(ROOT)
)
FENCE = re.compile(
    r"(?:<!-- docs-test: (?P<verb>skip|run in) (?P<why>[^>]*?) -->\n)?"
    r"^```(?P<lang>[A-Za-z0-9_+-]*)[^\n]*\n(?P<code>.*?)^```",
    re.DOTALL | re.MULTILINE,
)


@dataclass
class Block:
    page: str
    number: int
    lang: str
    code: str
    skip: str | None  # the reason, when the block is not executed here


def blocks(page: Path) -> list[Block]:
    found = []
    for number, match in enumerate(FENCE.finditer(page.read_text(encoding="utf-8")), 1):
        why = match["why"].strip() if match["verb"] else None
        if match["verb"]:
            assert why, f"{page.name} block {number}: a docs-test marker needs a reason"
        name = str(page.relative_to(ROOT))
        found.append(Block(name, number, match["lang"].lower(), match["code"], why))
    return found


def _ids(pages: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in pages]


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_yaml_and_bash_blocks_parse(page: Path) -> None:
    for block in blocks(page):
        where = f"{block.page}[block {block.number}]"
        if block.lang in ("yaml", "yml"):
            list(yaml.safe_load_all(block.code))  # raises with line and column
        elif block.lang in ("bash", "sh", "shell", "console"):
            done = subprocess.run(
                ["bash", "-n"], input=block.code, capture_output=True, text=True, check=False
            )
            assert done.returncode == 0, f"{where}: {done.stderr}"
        elif block.lang in ("python", "py"):
            compile(block.code, where, "exec")


PYTHON_PAGES = [p for p in PAGES if any(b.lang == "python" for b in blocks(p))]


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=_ids(PYTHON_PAGES))
def test_python_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # pages that write reports write them here
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    ran = 0
    for block in blocks(page):
        if block.lang != "python" or block.skip is not None:
            continue
        exec(compile(block.code, f"{block.page}[block {block.number}]", "exec"), namespace)
        ran += 1
    assert os.getcwd() == str(tmp_path)
    if ran == 0:
        pytest.skip(f"{page.name}: every Python block is marked as run elsewhere or skipped")


def test_every_docs_page_is_covered() -> None:
    # The pages with the pipeline's and the library's copyable code must have blocks.
    names = {str(p.relative_to(ROOT)) for p in PYTHON_PAGES}
    assert {"README.md", "docs/extending.md"} <= names
    assert any(b.lang == "yaml" for b in blocks(ROOT / "docs" / "pipeline.md"))


def test_each_readme_python_block_runs_on_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer copies one block at a time: each brings its own imports."""
    monkeypatch.chdir(tmp_path)
    ran = 0
    for block in blocks(ROOT / "README.md"):
        if block.lang != "python" or block.skip is not None:
            continue
        fresh: dict[str, object] = {"__name__": f"readme_block_{block.number}"}
        exec(compile(block.code, f"README.md[block {block.number}]", "exec"), fresh)
        ran += 1
    assert ran >= 2


def test_extending_uncounted_operator_block_holds_after_compiled_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The custom_mapping example asserts which operator went uncounted, not the whole
    diagnostics list: a process that compiled code earlier (a suite's compile tests) adds
    ``compiled_code_eager`` to every count, and the page must hold there too."""
    import torch

    monkeypatch.chdir(tmp_path)
    (block,) = [
        b
        for b in blocks(ROOT / "docs" / "extending.md")
        if b.lang == "python" and '"uncounted_operator"' in b.code
    ]
    namespace: dict[str, object] = {"__name__": "docs_extending_after_compile"}
    with dynamo_counters_as_found():
        compiled = torch.compile(lambda x: x + 1, backend="eager")  # eager: fast, real frames
        compiled(torch.ones(2))
        exec(compile(block.code, f"{block.page}[block {block.number}]", "exec"), namespace)
    report: Any = namespace["report"]
    codes = [d.code for d in report.diagnostics]
    assert sorted(codes) == ["compiled_code_eager", "uncounted_operator"]  # the case it is for
