"""``python -m torchscan_stages history [REV_RANGE]``: committed metrics over commits, steps.

Reads every first-parent commit's metrics/*.json, dvc.lock and params.yaml from git objects
(no checkout; the full reports from the DVC cache where present), fits steps per comparable
segment, prints them, and writes ``--json`` (the history report) and ``--html`` (its page).
``--bisect GOOD BAD --metric NAME`` narrows a step to one commit instead.

Exit status: 0 done (no gate failure; bisect: a commit named); 1 ``--min-effect`` is set
and a confident step in a metric's bad direction lies beyond it (the gate), or a bisect
stage run failed; 2 bad arguments (naming the argument, path or revision: a range starting
with ``-``, an unknown revision or metric, no such repository, one path for two outputs,
an output that cannot be written); 3 bisect inconclusive (the noise cannot separate the
commits). A suspect step (resting on warned points) is printed, never gated.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_GATE = 1
EXIT_USAGE = 2
EXIT_INCONCLUSIVE = 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m torchscan_stages history",
        description="Committed flat metrics over git history: steps, a JSON report, a page.",
    )
    parser.add_argument("rev_range", nargs="?", default=None, metavar="REV_RANGE",
                        help="what `git log` takes (default: the commits that carry results, "
                        "first-parent)")  # fmt: skip
    parser.add_argument("--limit", type=int, default=200, help="newest N commits (200)")
    parser.add_argument("--all", action="store_true", dest="whole",
                        help="without REV_RANGE: every commit up to --limit, not only those "
                        "that carry results")  # fmt: skip
    parser.add_argument("--max-file-mb", type=float, default=None, metavar="MB",
                        help="size cap on one committed metrics file (default 4, or "
                        "TORCHSCAN_STAGES_MAX_METRICS_MB)")  # fmt: skip
    parser.add_argument("--repo", type=Path, default=Path("."), help="the git repository (.)")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    parser.add_argument("--html", type=Path, default=None, metavar="OUT.html")
    parser.add_argument("--min-effect", type=float, default=None, metavar="R",
                        help="owner's minimum ratio change (0.1: 10%%); sets the gate")  # fmt: skip
    parser.add_argument("--no-reports", action="store_true",
                        help="flat metrics only: do not read the DVC cache")  # fmt: skip
    parser.add_argument("--bisect", nargs=2, metavar=("GOOD", "BAD"), default=None)
    parser.add_argument("--metric", default=None, help="STAGE/NAME: only this series "
                        "(with --bisect: STAGE/NAME or NAME)")  # fmt: skip
    return parser


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"history: error: {message}", file=sys.stderr)
    return code


def _bisect(args: argparse.Namespace) -> int:
    from ..compare.deltas import Judge
    from ..history.bisect import BisectError, MetricNameError, bisect_step

    if not args.metric:
        return _fail("--bisect needs --metric NAME (STAGE/NAME or a flat metric name)")
    try:
        judge = Judge.from_mapping(
            {} if args.min_effect is None else {"min_effect": args.min_effect}
        )
    except ValueError as error:  # e.g. below the interval floor a latency verdict needs
        return _fail(f"--min-effect {args.min_effect}: {error}")
    try:
        good, bad = args.bisect
        result = bisect_step(args.repo, good, bad, args.metric, judge=judge)
    except MetricNameError as error:
        return _fail(str(error))
    except BisectError as error:
        return _fail(str(error), EXIT_GATE)
    for probe in result.probes:
        print(f"  probe {probe.commit[:10]} ({probe.source}): GOOD->it {probe.vs_good}, "
              f"it->BAD {probe.vs_bad}")  # fmt: skip
    if result.verdict == "found":
        print(
            f"bisect {result.metric}: first {result.direction} commit {result.bad} "
            f"({result.reason})"
        )
        return 0
    print(f"bisect {result.metric}: inconclusive: {result.reason}")
    return EXIT_INCONCLUSIVE


def _check_outputs(args: argparse.Namespace) -> None:
    """Each output a file of its own, checked before any work (ValueError naming it)."""
    from ..report import check_output_path

    for out, example in ((args.json, "history.json"), (args.html, "history.html")):
        check_output_path(out, [], example=example)
    both = args.json is not None and args.html is not None
    if both and args.json.resolve() == args.html.resolve():
        raise ValueError(
            f"--json and --html name the same file {str(args.json)!r}; one path per "
            "output (such as history.json and history.html)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    from ..history.gitread import GitError

    if args.limit < 1:
        return _fail(f"--limit must be >= 1, got {args.limit}")
    if args.min_effect is not None and not 0.0 <= args.min_effect < 1.0:
        return _fail(f"--min-effect must be in [0, 1), got {args.min_effect}")
    if args.max_file_mb is not None and not 0.0 < args.max_file_mb < float("inf"):
        return _fail(f"--max-file-mb must be a size > 0 in MiB, got {args.max_file_mb}")
    try:
        _check_outputs(args)
        if args.bisect:
            return _bisect(args)
        return _history(args)
    except (GitError, ValueError) as error:
        return _fail(str(error))


def _print_steps(steps: list[Any]) -> None:
    for step in steps:
        where = step.after[:10] if step.single_commit else f"{step.before[:10]}..{step.after[:10]}"
        hint = "" if step.single_commit else ", bisect to narrow"
        line = (f"{step.metric}: {step.direction} x{step.ratio:.4g} "
                f"[{step.ci_low:.4g}, {step.ci_high:.4g}] in {where} "
                f"({len(step.commits)} commit(s){hint})")  # fmt: skip
        if not step.suspect:
            print(f"  {line}")
            continue
        warned = ", ".join(c[:10] for c in step.rests_on[:6])
        more = f" (+{len(step.rests_on) - 6})" if len(step.rests_on) > 6 else ""
        print(f"  suspect: needs a quiet rerun: {line}; rests on weak point(s) at "
              f"{warned}{more} ({', '.join(step.warnings)})")  # fmt: skip
        print(f"    rerun: {step.rerun}")


def _history(args: argparse.Namespace) -> int:
    from ..history import (
        detect_steps,
        gate_failures,
        history_document,
        read_history,
        write_history_json,
    )
    from ..render import render_report
    from ..report import atomic_write_text

    history = read_history(args.repo, args.rev_range, args.limit, reports=not args.no_reports,
                           whole=args.whole, max_file_mb=args.max_file_mb)  # fmt: skip
    if args.metric is not None:
        known = [s.metric for s in history.series]
        if args.metric not in known:
            shown = ", ".join(known[:8]) + (" ..." if len(known) > 8 else "")
            raise ValueError(f"--metric {args.metric!r}: no such series in these commits "
                             f"(STAGE/NAME; there are: {shown or 'none'})")  # fmt: skip
        history.series = [s for s in history.series if s.metric == args.metric]
    steps = detect_steps(history, min_effect=args.min_effect)
    settings = {"limit": args.limit, "min_effect": args.min_effect, "reports": not args.no_reports,
                "all": args.whole}  # fmt: skip
    document = history_document(history, steps, settings)
    for flag, path, write in (
        ("--json", args.json, lambda p: write_history_json(document, p)),
        ("--html", args.html, lambda p: atomic_write_text(p, render_report(document))),
    ):
        if path is None:
            continue
        try:
            write(path)
        except OSError as error:  # named by the argument, never by its temporary file
            raise ValueError(
                f"cannot write {flag} {str(path)!r}: {error.strerror or error}"
            ) from None
    confident = [s for s in steps if not s.suspect]
    print(f"history {history.rev_range}: {len(history.commits)} commits, "
          f"{len(history.series)} series, {len(confident)} confident step(s), "
          f"{len(steps) - len(confident)} suspect")  # fmt: skip
    if history.range_note:
        print(f"  range: {history.range_note}")
    _print_steps(steps)
    failed = gate_failures(steps)
    if failed:
        print(f"gate: {len(failed)} confident step(s) beyond the minimum effect "
              f"{args.min_effect:.1%} in a bad direction", file=sys.stderr)  # fmt: skip
        return EXIT_GATE
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
