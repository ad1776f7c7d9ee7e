"""docs/bad-input.md cites only tests that exist, and every runnable case has its row."""

from __future__ import annotations

import re
from pathlib import Path

from test_bad_inputs import CASES

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "bad-input.md"
ROW = re.compile(r"^\| (\d+) \|")
CASE = re.compile(r"`B\[([a-z0-9-]+)\]`")
TEST = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _rows() -> list[str]:
    return [line for line in PAGE.read_text(encoding="utf-8").splitlines() if ROW.match(line)]


def test_the_page_has_at_least_60_numbered_entries_in_order() -> None:
    numbers = [int(ROW.match(row).group(1)) for row in _rows()]  # type: ignore[union-attr]
    assert len(numbers) >= 60
    assert numbers == list(range(1, len(numbers) + 1))


def test_every_row_names_a_test_that_exists() -> None:
    ids = {case[0] for case in CASES}
    for row in _rows():
        cases, tests = CASE.findall(row), TEST.findall(row)
        assert cases or tests, f"row without a test: {row[:80]}"
        assert "pending" not in row, f"a row waits for another branch: {row[:80]}"
        for case in cases:
            assert case in ids, f"unknown case B[{case}] in: {row[:80]}"
        for path, name in tests:
            source = (ROOT / path).read_text(encoding="utf-8")
            assert f"def {name}(" in source, f"{path}::{name} does not exist"


def test_every_runnable_case_has_its_row() -> None:
    cited = {case for row in _rows() for case in CASE.findall(row)}
    missing = sorted({case[0] for case in CASES} - cited)
    assert not missing, f"cases without a row in docs/bad-input.md: {missing}"
