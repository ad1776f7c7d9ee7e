"""The peers' own test suites run against this package: how many results are right?

Run in the benchmark environment (it has the peers): ``python benchmarks/run_all.py
--setup-only`` once, then ``benchmarks/.venv/bin/python benchmarks/peer_suites.py [--out
PATH]``. Nothing of the peers' suites is kept in this repository: torchinfo's tests come from
its sdist, downloaded with pip into a temporary folder at run time; fvcore's sdists ship no
tests (none of them does), so its cases are the facts its tests state (model shapes and the
counts they assert), written as data in ``peer_fvcore.py``, and fvcore itself is run beside
the package on every one. Each case is one peer call, classified as right, wrong (complete
and wrong: the defect that must be 0), partial (a lower bound or unavailable, with a
diagnostic), refused (a clear error), crashed (a raw exception: a defect) or not runnable here
(with the reason). Prints a table and a tally; writes JSON to ``--out`` (default: a temporary
folder).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from doc_sections import write_section
from peer_outputs import VERDICTS, Case, tally


def fetch_sdist(name: str, version: str, into: Path) -> Path:
    """``pip download`` the source distribution and unpack it; returns its root folder."""
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"),
            *(f"{name}=={version}", "-d", str(into)),
        ],
        check=True,
    )
    (archive,) = into.glob(f"{name}-{version}.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / f"{name}-{version}"


def _row(case: Case) -> str:
    shown = [
        f"{c.name}={c.got if c.got is None else round(c.got)}"
        + ("" if c.verdict == "right" and not c.note else f" [{c.verdict}] {c.note}")
        for c in case.checks
        if c.verdict != "right" or c.note
    ]
    detail = "; ".join(filter(None, [case.error, *shown]))
    return f"{case.verdict:<12} {case.peer:<9} {case.test}#{case.call}  {detail}"[:400]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="JSON results path")
    parser.add_argument("--only", choices=("torchinfo", "fvcore"), default=None)
    parser.add_argument("--doc", type=Path, default=None, help="page to write the section to")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    missing = [n for n in ("torchinfo", "fvcore", "pytest") if importlib.util.find_spec(n) is None]
    if missing:
        print(
            f"peer_suites.py: {', '.join(missing)} not installed here; run it with "
            "benchmarks/.venv/bin/python (built by python benchmarks/run_all.py --setup-only)",
            file=sys.stderr,
        )
        return 2
    import torch

    torch.set_num_threads(1)
    started = time.monotonic()
    cases: list[Case] = []
    with tempfile.TemporaryDirectory(prefix="peer-suites-") as scratch:
        if args.only in (None, "torchinfo"):
            import peer_torchinfo

            try:
                root = fetch_sdist("torchinfo", peer_torchinfo.TESTS_VERSION, Path(scratch))
            except (subprocess.CalledProcessError, ValueError) as error:  # no registry here
                why = f"pip could not fetch torchinfo {peer_torchinfo.TESTS_VERSION}: {error}"
                cases.append(Case("torchinfo", "(its test suite)", 0, [], why, "not_runnable"))
            else:
                cases += peer_torchinfo.run_suite(root)
        if args.only in (None, "fvcore"):
            import peer_fvcore

            cases += peer_fvcore.run_cases()
        out = args.out or Path(scratch).parent / "peer-suites.json"
        counts = tally(cases)
        for case in cases:
            print(_row(case))
        print()
        columns = [*VERDICTS, "peer_differs"]
        print(f"{'peer':<10}" + "".join(f"{v:>13}" for v in columns) + f"{'cases':>8}")
        for peer, row in counts.items():
            print(f"{peer:<10}" + "".join(f"{row[v]:>13}" for v in columns), end="")
            print(f"{sum(row[v] for v in VERDICTS):>8}")
        document = {
            "command": " ".join(
                ["benchmarks/.venv/bin/python benchmarks/peer_suites.py", *(argv or sys.argv[1:])]
            ),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "seconds": round(time.monotonic() - started, 1),
            "versions": _versions(),
            "tally": counts,
            "cases": [c.as_dict() for c in cases],
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(document, indent=1, default=str), encoding="utf-8")
        print(f"\nwrote {out} in {document['seconds']} s")
        if args.doc is not None:
            write_section(args.doc, "bench_peer_suites", render_section(document, cases))
    return 0


def render_section(document: dict[str, Any], cases: list[Case]) -> str:
    """The docs/benchmarks.md section: command, date, tally per peer, each case not right."""
    versions = document["versions"]
    lines = [
        "## The peers' own suites",
        "",
        f"Run: {document['date']} by `{document['command']}` ({document['seconds']} s; torch "
        f"{versions['torch']}, torchinfo {versions['torchinfo']} running the tests of its "
        f"1.7.0 sdist, fvcore {versions['fvcore']} beside the facts its tests state). A case "
        "is one peer call; *peer differs* counts right cases where the peer's own figure is "
        "not the package's (its convention or its miss; the arithmetic is in the JSON). "
        "torchinfo's checks: its printed totals and literal asserts (parameters, trainable, "
        "frozen, mult-adds), each table row (type, output shapes, Param #) against a record, "
        "every called module's MACs against torch's products inside it, and the same figures "
        "from the package's generated inputs where the test's batch is 1. fvcore's: the total "
        "and per-module counts its tests assert, from the module crawl and from operator "
        "dispatch; its non-product counts against the package's documented closed forms.",
        "",
        "| peer | " + " | ".join(VERDICTS) + " | peer differs | cases | checks |",
        "| --- |" + " ---: |" * (len(VERDICTS) + 3),
    ]
    for peer, row in document["tally"].items():
        checks = sum(len(c.checks) for c in cases if c.peer == peer)
        cells = [str(row[v]) for v in VERDICTS]
        total = sum(row[v] for v in VERDICTS)
        lines.append(
            f"| {peer} | " + " | ".join(cells) + f" | {row['peer_differs']} | {total} | {checks} |"
        )
    lines += ["", "The kinds issue 40 names (cases by verdict):", ""]
    for tag in ("recursive", "packed", "no_input", "structured_output"):
        tagged = [c for c in cases if tag in c.tags]
        verdicts = {v: sum(c.verdict == v for c in tagged) for v in VERDICTS}
        shown = ", ".join(f"{n} {v}" for v, n in verdicts.items() if n)
        names = sorted({c.test.split("::")[-1] for c in tagged})
        lines.append(f"* {tag}: {shown} ({', '.join(names)})")
    lines.append(
        "* object outputs (`torch.distributions`, objects holding tensors): no case in either "
        "peer's shipped tests; `tests/analysis/test_peer_suites.py` holds them"
    )
    lines += [
        "",
        "Where the peer's own figure differs (right by torch or by the package's "
        "documented convention; count of checks, one example):",
        "",
    ]
    lines += _differences(cases)
    lines.append(
        "* torchinfo's mult-adds are a layer's parameter elements times its output batch (and "
        "spatial size for convolutions, steps for RNNs): bias adds count as MACs, a Linear's "
        "sequence rows and all of an Embedding's lookups are not the work (test_lstm: LSTM "
        "3,768,320 parameters x 100 steps + Embedding 6,000 + Linear 10,260 = 376,848,260; "
        "the products are 377,036,800); a scripted model shows 0"
    )
    lines += ["", "Cases not right:", ""]
    for case in cases:
        if case.verdict != "right":
            lines.append(f"* {case.verdict}: {_row(case).split(None, 2)[2]}")
    return "\n".join(lines) + "\n\n"


def _differences(cases: list[Case]) -> list[str]:
    seen: dict[tuple[str, str], list[str]] = {}
    for case in cases:
        for check in case.checks:
            differs = check.got != check.expected and not check.rounded
            if check.verdict == "right" and check.note and differs:
                example = f"{case.test.split('::')[-1]}: peer {check.expected:.0f}, {check.note}"
                seen.setdefault((case.peer, check.name), []).append(example)
    return [f"* {peer} {name} ({len(v)}): {v[0]}" for (peer, name), v in seen.items()]


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    names = ("torch", "torchinfo", "fvcore", "torchscan-stages")
    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except Exception:
            found[name] = "absent"
    return found


if __name__ == "__main__":
    raise SystemExit(main())
