"""Stage ``sources``: a fingerprint of the user's model and input code (reports/sources.json).

Hashes the source of the package that ``model._target_`` and ``input._target_`` name (found
without importing it; installed code in site-packages is not hashed), so editing your model
file reruns exactly the stages that build the model. Runs on every ``dvc repro``
(``always_changed``) and stays cheap: no torch, no hydra. Its output (a ``sources`` report)
has no timestamps or absolute paths and is rewritten only when it changes. Only regular
``*.py`` files are read (never a FIFO or device); what the walk left out is printed, one line
each, and listed in the document beside the files it hashed.
"""

from __future__ import annotations

import sys
from pathlib import Path

OUTPUT = Path("reports") / "sources.json"
PARAMS = Path("params.yaml")
USAGE = (
    "usage: python -m torchscan_stages.stages.sources [--params PARAMS] [OUTPUT]  "
    f"(defaults {PARAMS}, {OUTPUT})"
)


def main(argv: list[str] | None = None) -> int:
    from ..pipeline.sources import sources_document
    from ..provenance import environment_provenance
    from ..report import atomic_write_text, report_text
    from ..report.fingerprint import SourcesReport

    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(f"{USAGE}\n\n{__doc__}\nwrites: {OUTPUT}")
        return 0
    params_path = PARAMS
    if len(args) >= 2 and args[0] == "--params":
        params_path, args = Path(args[1]), args[2:]
    if len(args) > 1 or (args and args[0].startswith("-")):
        print(f"sources: unexpected arguments {args!r}\n{USAGE}", file=sys.stderr)
        return 2
    import yaml

    try:
        params = yaml.safe_load(params_path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        print(f"sources: cannot read {params_path}: {error}", file=sys.stderr)
        return 2
    target = Path(args[0]) if args else OUTPUT
    document = sources_document(params if isinstance(params, dict) else {})
    report = SourcesReport(provenance=environment_provenance(), sources=document)
    text = report_text(report)
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        atomic_write_text(target, text)
    hashed = [f"{name} {entry['package']} ({entry['files']} files)" for name, entry in
              document.items() if "sha256" in entry]  # fmt: skip
    print(f"sources: {', '.join(hashed) or 'no user source to hash'} -> {target}")
    for entry in document.values():
        for note in entry.get("skipped", []):
            print(f"sources: skipped {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
