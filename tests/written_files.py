"""Which JSON files docs/reports.md exempts from being reports ("Files that are not reports"):
DVC's flat metrics and plots data and the transient files of the table. The fast tier's
tests/report/test_written_files.py and the end-to-end DVC test walk written files with it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def not_reports() -> list[str]:
    """The file patterns of docs/reports.md's "Files that are not reports" table."""
    text = (ROOT / "docs" / "reports.md").read_text(encoding="utf-8")
    table = text.split("### Files that are not reports", 1)[1]
    return [line.split("`")[1] for line in table.splitlines() if line.startswith("| `")]


def exempt(relative: str) -> bool:
    """Whether docs/reports.md exempts the file at ``relative`` (a POSIX path); an evidence
    sidecar beside the metrics files never is."""
    name = relative.rsplit("/", 1)[-1]
    if name.endswith(".evidence.json"):
        return False
    return any(
        fnmatch(relative, p) or fnmatch(relative, f"*/{p}") or fnmatch(name, p)
        for p in not_reports()
    )


def json_files(folder: Path, paths: Iterable[Path] | None = None) -> Iterator[tuple[Path, bool]]:
    """Every JSON file under ``folder`` (or of ``paths``), and whether the docs exempt it."""
    found = sorted(folder.rglob("*")) if paths is None else sorted(paths)
    for path in found:
        if path.is_file() and path.name.endswith((".json", ".json.gz", ".jsonl")):
            yield path, exempt(path.relative_to(folder).as_posix())
