"""docs/architecture.md's "Who owns what", generated from the package's own docstrings.

Each top-level part of the package is one entry: the first line of its docstring (a package's
``__init__``, or the module itself), the line starting ``Never:`` in that docstring (what the
part never does), then every module under it with the first line of its docstring. So the map
names every module and cannot drift: tests/test_architecture_map.py compares the page with
this text; ``UPDATE_DOCS=1 pytest tests/test_architecture_map.py`` rewrites it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "torchscan_stages"
BEGIN = "<!-- owners: generated from the docstrings by tests/architecture_map.py -->"
END = "<!-- owners: end -->"
# the floors of docs/architecture.md's layer rules, bottom up; a part not listed goes last
ORDER = (
    "report",
    "provenance",
    "devices",
    "targets",
    "workloads",
    "stats",
    "_gc",
    "_signals",
    "_version",
    "analysis",
    "integrations",
    "measure",
    "predict",
    "compare",
    "serve",
    "render",
    "zoo",
    "face",
    "__init__",
    "__main__",
    "commands",
    "history",
    "pipeline",
    "stages",
)


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def _first_line(text: str) -> str:
    """The docstring's summary: its first paragraph, joined to one line."""
    return " ".join(text.strip().split("\n\n")[0].split()) if text.strip() else "(no docstring)"


def _never(text: str) -> str | None:
    """The paragraph that starts ``Never:``, joined to one line."""
    for paragraph in text.split("\n\n"):
        if paragraph.strip().startswith("Never:"):
            return " ".join(paragraph.split())
    return None


def _parts() -> list[Path]:
    found = [p for p in PACKAGE.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()]
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(found, key=lambda p: (rank.get(p.stem, len(ORDER)), p.name))


def _entry(part: Path) -> list[str]:
    doc = _docstring(part / "__init__.py" if part.is_dir() else part)
    name = f"`{part.name}/`" if part.is_dir() else f"`{part.name}`"
    lines = [f"- **{name}** {_first_line(doc)}"]
    if (never := _never(doc)) is not None:
        lines.append(f"  {never}")
    if part.is_dir():
        for module in sorted(part.rglob("*.py")):
            if module.name == "__init__.py" and module.parent == part:
                continue
            shown = module.relative_to(part).as_posix()
            if module.name == "__init__.py":
                shown = f"{module.parent.relative_to(part).as_posix()}/"
            lines.append(f"  - `{shown}`: {_first_line(_docstring(module))}")
    return lines


def owners_text() -> str:
    """The generated block, markers included."""
    body = [line for part in _parts() for line in _entry(part)]
    return "\n".join([BEGIN, *body, END])


def replace_block(page: str, block: str) -> str:
    start, end = page.index(BEGIN), page.index(END) + len(END)
    return page[:start] + block + page[end:]
