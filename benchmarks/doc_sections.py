"""Each focused benchmark script owns one block of docs/benchmarks.md between its markers.

``run_all.py`` rewrites the page and keeps these blocks (``tables._kept_sections``); a script
run with ``--doc`` replaces only its own block, or appends it the first time.
"""

from __future__ import annotations

import os
import re
from pathlib import Path


def markers(name: str) -> tuple[str, str]:
    """The begin and end comments of block ``name`` (for example ``bench_crawl``)."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def write_section(path: Path, name: str, text: str) -> None:
    """Replace (or append) block ``name`` of the page at ``path`` with ``text``, atomically."""
    begin, end = markers(name)
    block = f"{begin}\n{text}{end}\n"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end) + r"\n?", re.DOTALL)
    new = pattern.sub(lambda _: block, old) if pattern.search(old) else old + "\n" + block
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(new, encoding="utf-8")
    os.replace(tmp, path)
