"""Stage ``env``: the environment fingerprint and its hash, which every measurement depends on.

Runs on every ``dvc repro`` (``always_changed``), so it must stay cheap: no torch, no hydra,
no dvc. Its output (an ``environment`` report) has no timestamps and is byte-identical while
nothing changed, so DVC reruns the measurements only when the environment really changed.
"""

from __future__ import annotations

import sys
from pathlib import Path

OUTPUT = Path("reports") / "env.json"


def environment_text() -> str:
    """This environment's ``environment`` report, as the file holds it (compact JSON)."""
    from ..provenance import environment_provenance
    from ..report import report_text
    from ..report.fingerprint import EnvironmentReport

    return report_text(EnvironmentReport(provenance=environment_provenance()))


def main(argv: list[str] | None = None) -> int:
    from ..report import atomic_write_text

    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(f"usage: python -m torchscan_stages.stages.env [OUTPUT]  (default {OUTPUT})")
        return 0
    if len(args) > 1 or (args and args[0].startswith("-")):
        print(
            f"env stage: unexpected arguments {args!r}; expected at most one OUTPUT path",
            file=sys.stderr,
        )
        return 2
    target = Path(args[0]) if args else OUTPUT
    text = environment_text()
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        atomic_write_text(target, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
