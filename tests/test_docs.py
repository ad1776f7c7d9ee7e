"""Documentation code runs: every Python block of the copyable pages, in order, as written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _blocks(page: Path) -> list[str]:
    return BLOCK.findall(page.read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", ["docs/extending.md", "README.md"])
def test_page_code_runs(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _blocks(ROOT / page)
    assert blocks, f"{page} has no python blocks"
    monkeypatch.chdir(tmp_path)  # pages that write reports write them here
    namespace: dict[str, object] = {"__name__": f"docs_{Path(page).stem}"}
    for number, code in enumerate(blocks, 1):
        exec(compile(code, f"{page}[block {number}]", "exec"), namespace)
    assert os.getcwd() == str(tmp_path)
