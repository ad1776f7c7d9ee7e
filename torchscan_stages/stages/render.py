"""Stage ``render``: one offline HTML page (reports/index.html) over every report.

Reads: the JSON reports of the other stages in a folder (default reports/), never the config,
so it needs no params. Writes: FOLDER/index.html (no network needed to view it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Page order; a missing report leaves its section out, and the stage says which.
ORDER = (
    "crawl",
    "flops",
    "predict",
    "memory",
    "latency",
    "serve",
    "rss",
    "profile",
    "compare",
    "compare_diff",
)
USAGE = "usage: python -m torchscan_stages.stages.render [FOLDER]  (default: reports)"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(f"{USAGE}\n\n{__doc__}")
        return 0
    if len(args) > 1 or (args and args[0].startswith("-")):
        print(f"render: unexpected arguments {args!r}\n{USAGE}", file=sys.stderr)
        return 2
    from ..render import render_index

    folder = Path(args[0]) if args else Path("reports")
    paths = [folder / f"{name}.json" for name in ORDER if (folder / f"{name}.json").exists()]
    if not paths:
        expected = ", ".join(f"{name}.json" for name in ORDER)
        print(f"render: no reports under {folder}/ (expected any of {expected})", file=sys.stderr)
        return 2
    missing = [f"{name}.json" for name in ORDER if not (folder / f"{name}.json").exists()]
    if missing:  # a page without a section must say so where it is made
        print(
            f"render: no {', '.join(missing)} under {folder}/: the page leaves "
            f"{'that section' if len(missing) == 1 else 'those sections'} out "
            "(`dvc repro` makes every report)"
        )
    target = folder / "index.html"
    try:
        render_index(paths, target, title="torchscan_stages pipeline")
    except ValueError as error:  # a truncated or invalid report: it names its file
        print(f"render: {error}; {target} was not written", file=sys.stderr)
        return 2
    except OSError as error:  # a full disk, an unwritable folder
        print(f"render: cannot write {target}: {error.strerror or error}", file=sys.stderr)
        return 1
    print(f"render: {len(paths)} reports -> wrote {target}")
    if os.environ.get("DVC_STAGE"):  # the pipeline's last stage: say what to commit
        from ..pipeline.commit import recipe_text

        print(recipe_text())
    return 0


def _entry() -> int:
    """``main`` with Ctrl-C and SIGTERM as one line and the shell's code (130, 143)."""
    from .._signals import Terminated, ending_signals_raise

    try:
        with ending_signals_raise(redeliver=False):
            return main()
    except KeyboardInterrupt:
        print("render: interrupted by SIGINT (Ctrl-C); nothing was replaced", file=sys.stderr)
        return 130
    except Terminated as ended:
        print(f"render: {ended}; nothing was replaced", file=sys.stderr)
        return ended.exit_code


if __name__ == "__main__":
    sys.exit(_entry())
