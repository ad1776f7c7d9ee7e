"""docs/architecture.md's "Who owns what" is the package's own docstrings (architecture_map)."""

from __future__ import annotations

import os

from architecture_map import BEGIN, END, ROOT, owners_text, replace_block

PAGE = ROOT / "docs" / "architecture.md"


def test_the_owner_map_is_generated_from_the_docstrings() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert BEGIN in page and END in page, "docs/architecture.md lost its generated block"
    block = owners_text()
    if os.environ.get("UPDATE_DOCS") == "1":
        PAGE.write_text(replace_block(page, block), encoding="utf-8")
        page = PAGE.read_text(encoding="utf-8")
    assert page[page.index(BEGIN) : page.index(END) + len(END)] == block, (
        "docs/architecture.md's owner map is out of date: "
        "UPDATE_DOCS=1 pytest tests/test_architecture_map.py, then review the diff"
    )


def test_every_module_and_part_is_named_with_a_docstring() -> None:
    block = owners_text()
    assert "(no docstring)" not in block
    for part in ("`analysis/`", "`predict/`", "`serve/`", "`pipeline/`", "`stages/`"):
        assert f"- **{part}**" in block
    # every top-level package says what it never does
    assert block.count("  Never:") >= 10
