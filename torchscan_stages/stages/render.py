"""Stage ``render``: one offline HTML page (reports/index.html) over every report.

It reads only reports, never the config, so it needs no params.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Page order; a missing report (stage not in this pipeline) is simply absent.
ORDER = (
    "crawl",
    "flops",
    "predict",
    "memory",
    "latency",
    "rss",
    "profile",
    "compare",
    "compare_diff",
)


def main(argv: list[str] | None = None) -> int:
    from ..render import render_index

    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0]) if args else Path("reports")
    paths = [folder / f"{name}.json" for name in ORDER if (folder / f"{name}.json").exists()]
    if not paths:
        print(f"render: no reports under {folder}", file=sys.stderr)
        return 2
    render_index(paths, folder / "index.html", title="torchscan_stages pipeline")
    print(folder / "index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
