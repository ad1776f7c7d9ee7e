"""``python -m torchscan_stages compare``: a Markdown summary for a pull request and a CI gate.

Exit codes: 0 passed (or no threshold and the check did not fail), 1 the output check failed
or latency is ``slower`` beyond ``--max-slowdown``, 2 bad arguments or unreadable inputs,
3 the gate cannot verify its threshold (the row is inconclusive, withheld, not comparable,
absent, or its interval reaches beyond the threshold). The rule: compare/gate.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..compare.gate import decide
from ..compare.inputs import compare_paths, output_problem, threshold_problem
from ..measure.host import pressure_text
from ..render.compare_markdown import comparison_markdown, diff_markdown, gate_markdown
from ..report import ReportDiff, atomic_write_text


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m torchscan_stages compare",
        description="Compare BASE and CANDIDATE reports (two AnalysisReports, two "
        "BenchmarkReports) or gate one saved BenchmarkComparison. Prints Markdown.",
    )
    add = parser.add_argument
    add("reports", nargs="+", type=Path, help="BASE.json CAND.json, or one comparison JSON")
    slowdown = "fail (exit 1) when the latency row is slower beyond this ratio; 3: cannot verify"
    add("--max-slowdown", type=float, default=None, help=slowdown)
    add("--min-effect", type=float, default=None, help="smallest ratio change that counts (0.05)")
    add("-o", "--output", type=Path, default=None, help="also write the comparison JSON here")
    add("--markdown", type=Path, default=None, help="also write the Markdown to this file")
    return parser


def _text(args: argparse.Namespace) -> tuple[object, str, int]:
    outputs = {"--output": (args.output, "comparison.json")}
    outputs["--markdown"] = (args.markdown, "comparison.md")
    problem = threshold_problem(args.max_slowdown, args.min_effect) or output_problem(
        outputs, args.reports
    )
    if problem is not None:
        raise ValueError(problem)
    result = compare_paths(args.reports, min_effect=args.min_effect, max_slowdown=args.max_slowdown)
    if isinstance(result, ReportDiff):
        return result, diff_markdown(result), 0
    outcome = decide(result, args.reports, args.max_slowdown)
    host = result.baseline.provenance.host if result.baseline is not None else None
    text = comparison_markdown(result, pressure_text(host) if host is not None else None)
    gate = gate_markdown(outcome.violations, outcome.unverified, outcome.passed, args.max_slowdown)
    return result, text + gate, outcome.exit_code


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        result, text, code = _text(args)
    except (ValueError, TypeError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(text, end="")
    try:
        if args.output is not None:
            result.save(args.output)  # type: ignore[attr-defined]
        if args.markdown is not None:
            atomic_write_text(args.markdown, text)
    except OSError as error:
        print(
            f"error: cannot write {error.filename or 'the output'}: {error.strerror}",
            file=sys.stderr,
        )
        return 2
    return code
