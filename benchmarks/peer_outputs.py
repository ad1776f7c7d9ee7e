"""Pure helpers of ``peer_suites.py``: read a peer's expected figures, classify a comparison.

Kept apart from the runner (no torch, no peer import) so they are cheap to test. The figures
are read from the peer's own files at run time; nothing here holds a peer's number.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

# worst first: a case takes the worst verdict of its checks
VERDICTS = ("wrong", "crashed", "refused", "partial", "not_runnable", "right")
_UNITS = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_TOTALS = {
    "Total params": "total_params",
    "Trainable params": "trainable_params",
    "Non-trainable params": "non_trainable_params",
}


@dataclass
class Check:
    """One figure compared: what the peer expected, what the package said, and the verdict."""

    name: str
    expected: float | None
    got: float | None
    verdict: str
    note: str = ""
    rounded: bool = False  # equal to the peer's figure as printed (rounded), not exactly


@dataclass
class Case:
    """One peer test call run against the package."""

    peer: str
    test: str
    call: int
    checks: list[Check] = field(default_factory=list)
    error: str = ""
    verdict: str = ""
    tags: list[str] = field(default_factory=list)  # the named kinds: no_input, ...

    def finish(self) -> Case:
        """The case verdict: its worst check, or the error's class when nothing was compared."""
        if not self.verdict:
            ranks = [VERDICTS.index(c.verdict) for c in self.checks]
            self.verdict = VERDICTS[min(ranks)] if ranks else "not_runnable"
        return self

    def as_dict(self) -> dict[str, Any]:
        return {
            "peer": self.peer,
            "test": self.test,
            "call": self.call,
            "verdict": self.verdict,
            "error": self.error,
            "tags": self.tags,
            "checks": [c.__dict__ for c in self.checks],
        }


def split_blocks(text: str) -> list[str]:
    """A torchinfo output file holds one table per printing ``summary`` call, in call order."""
    lines = text.splitlines()
    starts = [i - 1 for i, line in enumerate(lines) if line.startswith("Layer (type")]
    return ["\n".join(lines[a:b]) for a, b in zip(starts, [*starts[1:], len(lines)], strict=True)]


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _column_sum(block: str, title: str) -> int | None:
    """The exact sum of a column (the peer's own tests assert it equals the printed total)."""
    lines = block.splitlines()
    header = lines[1]
    offset = header.find(title)
    if offset < 0:
        return None
    rule = [i for i, line in enumerate(lines) if line.startswith("=")]
    total = 0
    for line in lines[rule[1] + 1 : rule[2]]:
        cell = line[offset:].split(" ")[0] if len(line) > offset else ""
        if re.fullmatch(r"[\d,]+", cell):
            total += _int(cell)
    return total


def parse_block(block: str) -> dict[str, float]:
    """Totals of one torchinfo table; ``mult_adds`` exact when the column is shown."""
    figures: dict[str, float] = {}
    for label, key in _TOTALS.items():
        match = re.search(rf"^{label}: ([\d,]+)$", block, re.MULTILINE)
        if match:
            figures[key] = _int(match.group(1))
    match = re.search(r"^Total mult-adds \((\w+)\): ([\d.]+)$", block, re.MULTILINE)
    if match:
        figures["mult_adds_rounded"] = float(match.group(2)) * _UNITS[match.group(1)]
        figures["mult_adds_unit"] = _UNITS[match.group(1)]
    column = _column_sum(block, "Mult-Adds")
    if column is not None:
        figures["mult_adds"] = column
    return figures


@dataclass(frozen=True)
class Row:
    """One layer row of a torchinfo table: module type, depth, output shapes, Param # cell."""

    type: str
    depth: int
    shapes: tuple[tuple[int, ...], ...]
    params: str


def _shapes(cell: str) -> tuple[tuple[int, ...], ...]:
    """``[2, 10]`` is one shape, ``[[1, 10], [3]]`` several (torchinfo's dict/list outputs)."""
    try:
        value = ast.literal_eval(cell)
    except (ValueError, SyntaxError):
        return ()
    if isinstance(value, list) and all(type(v) is int for v in value):
        return (tuple(value),)
    if isinstance(value, list):
        return tuple(s for v in value for s in _shapes(repr(v)))
    return ()


def parse_rows(block: str) -> list[Row]:
    """The layer rows of one table (parameter sub-rows of verbose tables left out)."""
    lines = block.splitlines()
    header = lines[1]
    shape_at, param_at = header.find("Output Shape"), header.find("Param #")
    starts = sorted(i for i in (header.find(t) for t in _COLUMNS) if i > 0)
    rule = [i for i, line in enumerate(lines) if line.startswith("=")]
    rows = []
    for line in lines[rule[1] + 1 : rule[2]]:
        tree = max(line.find("├─"), line.find("└─"))
        name = line[: starts[0]].strip().lstrip("│├└─ ").strip()
        kind = re.split(r"[: (]", name, maxsplit=1)[0]
        cells = {at: _cell(line, at, starts) for at in (shape_at, param_at) if at > 0}
        param = cells.get(param_at, "")
        if not kind[:1].isupper() or param.startswith(("├─", "└─")):
            continue  # a parameter's own row (verbose tables)
        depth = 0 if tree < 0 else tree // 5 + 1
        rows.append(Row(kind, depth, _shapes(cells.get(shape_at, "")), param))
    return rows


_COLUMNS = ("Kernel Shape", "Input Shape", "Output Shape", "Param #", "Mult-Adds", "Trainable")


def _cell(line: str, at: int, starts: list[int]) -> str:
    end = min([s for s in starts if s > at], default=len(line))
    return line[at:end].strip()


def literal_asserts(source: str) -> dict[str, list[tuple[int, str, int]]]:
    """``assert name.attr == <int>`` per test function: (index of the summary call it follows,
    attribute, figure). Only straight-line functions (no loop) are read: there the source
    order of the ``summary`` calls is their run order."""
    found: dict[str, list[tuple[int, str, int]]] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test_"):
            continue
        if any(isinstance(n, ast.For | ast.While) for n in ast.walk(node)):
            continue
        events: list[tuple[int, int, str, int | None]] = []
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and getattr(sub.func, "id", "") == "summary":
                events.append((sub.lineno, sub.col_offset, "call", None))
            elif isinstance(sub, ast.Assert) and isinstance(sub.test, ast.Compare):
                parsed = _assert_figure(sub.test)
                if parsed:
                    events.append((sub.lineno, sub.col_offset, parsed[0], parsed[1]))
        calls = -1
        for _, _, kind, value in sorted(events, key=lambda e: (e[0], e[1])):
            if kind == "call":
                calls += 1
            elif value is not None and calls >= 0:
                found.setdefault(node.name, []).append((calls, kind, value))
    return found


def _assert_figure(test: ast.Compare) -> tuple[str, int] | None:
    left = test.left
    if not (isinstance(left, ast.Attribute) and isinstance(test.ops[0], ast.Eq)):
        return None
    for right in test.comparators:
        if isinstance(right, ast.Constant) and type(right.value) is int:
            return left.attr, right.value
    return None


def compare_figure(
    name: str, expected: float, got: float | None, status: str, tolerance: float = 0.0
) -> Check:
    """Equal (within the printed rounding) and complete is right; a complete other figure is
    wrong until a convention explains it exactly (the caller re-judges with its arithmetic)."""
    if status != "complete" or got is None:
        return Check(name, expected, got, "partial", f"package status {status}")
    if abs(got - expected) <= tolerance:
        return Check(name, expected, got, "right")
    return Check(name, expected, got, "wrong")


def peer_differs(case: Case) -> bool:
    """A right case where the peer's own figure is not the package's (a convention, or the
    peer wrong): the note beside the check says which and writes the arithmetic."""
    return any(
        c.verdict == "right"
        and c.note
        and c.got is not None
        and c.expected != c.got
        and not c.rounded
        for c in case.checks
    )


def tally(cases: list[Case]) -> dict[str, dict[str, int]]:
    """Cases per peer and verdict, every verdict listed (zeros included), and how many right
    cases hold a figure the peer's test states differently (``peer_differs``)."""
    result: dict[str, dict[str, int]] = {}
    for case in cases:
        counts = result.setdefault(case.peer, {**dict.fromkeys(VERDICTS, 0), "peer_differs": 0})
        counts[case.verdict] += 1
        counts["peer_differs"] += peer_differs(case)
    return result
