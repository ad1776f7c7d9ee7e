"""``python -m torchscan_stages render REPORT.json... -o report.html``.

One report gives its own page; several give an index page with every report embedded.
Every input is loaded and validated before the output is written, so a bad input leaves no
(partial or stale-looking) output file behind. An output that is a directory, an
unwritable path or one of the input reports is refused with one line and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..render.html import render_paths


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m torchscan_stages render",
        description="Render saved JSON reports to one self-contained offline HTML page.",
    )
    parser.add_argument(
        "reports",
        nargs="+",
        type=Path,
        metavar="REPORT.json",
        help="report files written by torchscan_stages (any kind)",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        metavar="OUT.html",
        help="the HTML file to write (atomically)",
    )
    parser.add_argument(
        "--title", default=None, help="page title; with several reports, the index title"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Exit status: 0 written, 1 a report could not be rendered, 2 bad arguments."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    for path in args.reports:
        if path.is_dir():
            print(f"render: error: {path}: is a directory, not a report file", file=sys.stderr)
            return 1
        if not path.is_file():
            print(f"render: error: {path}: no such report file", file=sys.stderr)
            return 1
    try:
        html = render_paths(list(args.reports), args.output, title=args.title)
    except (ValueError, TypeError) as error:
        print(f"render: error: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        reason = error.strerror or str(error)
        print(f"render: error: cannot write {args.output}: {reason}", file=sys.stderr)
        return 1
    size = len(html.encode("utf-8"))
    print(f"wrote {args.output} ({size:,} bytes, {len(args.reports)} report(s))")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
