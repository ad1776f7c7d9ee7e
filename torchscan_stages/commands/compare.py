"""``python -m torchscan_stages compare``: a Markdown summary for a pull request and a CI gate.

Exit codes: 0 = the gate passed (or no threshold was given and the check did not fail),
1 = a threshold is violated or the output check failed, 2 = bad arguments or inputs that
could not be read or compared, 3 = the gate cannot verify the threshold it was given (no
latency to judge, not comparable, or an interval that does not decide).

The gate follows the verdict rule of compare_benchmarks with the owner's threshold T as the
effect: it fails when the latency interval excludes no change (CI low > 1) and the ratio is
above T; it passes when the whole interval is at most T; anything else cannot be verified.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..compare.benchmarks import compare_benchmarks
from ..compare.recheck import recheck_saved
from ..compare.reports import compare_reports
from ..render.text import diagnostic_text, interval_text, markdown_table, metric_text, ratio_text
from ..report import (
    AnalysisReport,
    BenchmarkComparison,
    BenchmarkReport,
    PerformanceDelta,
    ReportDiff,
    atomic_write_text,
    check_output_path,
    load_report,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m torchscan_stages compare",
        description=(
            "Compare BASE and CANDIDATE reports (two AnalysisReports, two BenchmarkReports) or "
            "gate one saved BenchmarkComparison. Prints Markdown."
        ),
    )
    parser.add_argument(
        "reports",
        nargs="+",
        type=Path,
        help="BASE.json CAND.json, or one benchmark_comparison JSON",
    )
    parser.add_argument(
        "--max-slowdown",
        type=float,
        default=None,
        help="owner threshold: fail (exit 1) when latency is confidently slower than this "
        "ratio (e.g. 1.05); exit 3 when the comparison cannot verify it; no threshold means "
        "no verdict exit",
    )
    parser.add_argument(
        "--min-effect",
        type=float,
        default=None,
        help="smallest latency ratio change that counts (default 0.05)",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="also write the comparison report JSON here (atomically)",
    )
    parser.add_argument(
        "--markdown", type=Path, default=None, help="also write the Markdown summary to this file"
    )
    return parser


def markdown_for_comparison(result: BenchmarkComparison) -> str:
    """The comparison as Markdown: check first, then verdicts with their intervals."""
    check = result.check
    if not check.performed:
        check_line = "**Output check: not performed** (saved reports were compared)"
    elif check.passed:
        check_line = "**Output check: passed**"
    else:
        check_line = "**Output check: FAILED** — every performance delta is withheld"
    lines = [
        f"### {result.candidate_name or 'candidate'} vs {result.baseline_name or 'baseline'}",
        "",
        check_line,
    ]
    for label, value in (
        ("detail", check.detail),
        ("tolerance", check.tolerance),
        ("error", check.error),
    ):
        if value is not None:
            lines.append(f"- {label}: `{value}`")
    rows = [
        [
            delta.metric,
            metric_text(delta.baseline),
            metric_text(delta.candidate),
            ratio_text(delta.ratio),
            interval_text(delta.ci_low, delta.ci_high),
            f"**{delta.verdict.upper()}**" if delta.withheld else delta.verdict,
        ]
        for delta in result.deltas
    ]
    headers = ["metric", "baseline", "candidate", "ratio", "CI", "verdict"]
    lines += ["", *markdown_table(headers, rows)]
    if "stop_reason" in result.settings:
        lines += ["", f"Sampling stopped by: `{result.settings['stop_reason']}`."]
    if result.diagnostics:
        lines += ["", "Diagnostics:"]
        lines += [f"- {diagnostic_text(d, markdown=True)}" for d in result.diagnostics]
    return "\n".join(lines) + "\n"


def markdown_for_diff(diff: ReportDiff) -> str:
    """Model cost deltas as Markdown (no verdicts: formulas are not noisy)."""
    rows = [
        [
            name,
            metric_text(delta.before),
            metric_text(delta.after),
            "—" if delta.delta is None else f"{delta.delta:+,.6g}",
            ratio_text(delta.ratio),
        ]
        for name, delta in diff.totals.items()
    ]
    lines = [
        f"### Model cost: {diff.after_model} vs {diff.before_model}",
        "",
        *markdown_table(["total", "before", "after", "delta", "ratio"], rows),
        "",
        f"Layers: {len(diff.added)} added, {len(diff.removed)} removed, "
        f"{len(diff.changed)} changed.",
    ]
    if diff.diagnostics:
        lines += ["", "Diagnostics:"]
        lines += [f"- {diagnostic_text(d, markdown=True)}" for d in diff.diagnostics]
    return "\n".join(lines) + "\n"


@dataclass
class GateResult:
    """Violations fail the gate (exit 1); unverifiable thresholds stop it too (exit 3)."""

    violations: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.violations else 3 if self.unverified else 0


def _gate_latency(delta: PerformanceDelta, max_slowdown: float) -> tuple[str | None, str | None]:
    """(violation, unverified) for one latency delta under the owner's threshold."""
    interval = f"ratio {ratio_text(delta.ratio)}, CI {interval_text(delta.ci_low, delta.ci_high)}"
    if delta.verdict == "not_comparable":
        return None, f"not comparable ({delta.reason})"
    if delta.withheld:
        return None, "latency is withheld (the output check failed)"
    if delta.ratio is None or delta.ci_low is None or delta.ci_high is None:
        return None, f"no latency ratio with an interval ({delta.reason})"
    if delta.ci_low > 1.0 and delta.ratio > max_slowdown:
        return f"latency {interval} is slower than --max-slowdown {max_slowdown}", None
    if delta.ci_high <= max_slowdown:
        return None, None
    return None, (
        f"latency {interval} does not decide whether the slowdown stays within "
        f"--max-slowdown {max_slowdown}; measure longer or on a quieter host"
    )


def gate(result: BenchmarkComparison, max_slowdown: float | None) -> GateResult:
    """The owner's rules against one comparison: see the module docstring."""
    outcome = GateResult()
    if result.check.performed and result.check.passed is False:
        outcome.violations.append("the output check failed")
    if max_slowdown is None:
        return outcome
    latency = [delta for delta in result.deltas if delta.metric == "latency.warmed"]
    if not latency:
        outcome.unverified.append(
            "no warmed-latency delta to judge (a side has no latency or no raw blocks)"
        )
    for delta in latency:
        violation, unverified = _gate_latency(delta, max_slowdown)
        if violation is not None:
            outcome.violations.append(violation)
        if unverified is not None:
            outcome.unverified.append(unverified)
    return outcome


def _check_arguments(args: argparse.Namespace) -> str | None:
    """The first problem with the thresholds or output paths, as one line; None when fine."""
    if args.max_slowdown is not None and not (
        math.isfinite(args.max_slowdown) and args.max_slowdown >= 1.0
    ):
        return f"--max-slowdown must be a finite ratio >= 1.0 (e.g. 1.05), got {args.max_slowdown}"
    if args.min_effect is not None and not (
        math.isfinite(args.min_effect) and 0.0 <= args.min_effect < 1.0
    ):
        return f"--min-effect must be a finite number in [0, 1) (e.g. 0.05), got {args.min_effect}"
    for flag, path, example in (
        ("--output", args.output, "comparison.json"),
        ("--markdown", args.markdown, "comparison.md"),
    ):
        try:  # the one refusal every command shares (report.check_output_path)
            check_output_path(path, args.reports, example=example)
        except ValueError as error:
            return f"{flag}: {error}"
    return None


def _compare(args: argparse.Namespace) -> BenchmarkComparison | ReportDiff:
    reports = [load_report(path) for path in args.reports]
    if len(reports) == 1 and isinstance(reports[0], BenchmarkComparison):
        if args.min_effect is not None:
            judged = reports[0].settings.get("min_effect", "unrecorded")
            raise ValueError(
                f"--min-effect {args.min_effect} cannot rejudge a saved comparison "
                f"({args.reports[0]} was judged with min_effect={judged}); compare the two "
                "benchmark reports again with --min-effect"
            )
        return reports[0]
    if len(reports) == 2 and all(isinstance(r, AnalysisReport) for r in reports):
        for flag, value in (
            ("--min-effect", args.min_effect),
            ("--max-slowdown", args.max_slowdown),
        ):
            if value is not None:
                raise ValueError(
                    f"{flag} applies to benchmark reports (measured latency); two analysis "
                    "reports are compared count by count, exactly: drop the flag"
                )
        return compare_reports(reports[0], reports[1])  # type: ignore[arg-type]
    if len(reports) == 2 and all(isinstance(r, BenchmarkReport) for r in reports):
        options = {} if args.min_effect is None else {"min_effect": args.min_effect}
        return compare_benchmarks(reports[0], reports[1], **options)  # type: ignore[arg-type]
    kinds = ", ".join(r.kind for r in reports)
    raise ValueError(
        "expected two analysis reports, two benchmark reports or one "
        f"benchmark_comparison, got: {kinds}"
    )


def _gate_text(outcome: GateResult, max_slowdown: float | None) -> str:
    if outcome.violations:
        text = "\n**Gate: FAILED**\n" + "".join(f"- {p}\n" for p in outcome.violations)
        if outcome.unverified:
            text += "".join(f"- cannot verify: {p}\n" for p in outcome.unverified)
        return text
    if outcome.unverified:
        return "\n**Gate: CANNOT VERIFY**\n" + "".join(f"- {p}\n" for p in outcome.unverified)
    if max_slowdown is not None:
        return f"\n**Gate: passed** (--max-slowdown {max_slowdown})\n"
    return ""


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    problem = _check_arguments(args)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        result = _compare(args)
    except (ValueError, TypeError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if isinstance(result, ReportDiff):
        text, outcome = markdown_for_diff(result), GateResult()
    else:
        outcome = gate(result, args.max_slowdown)
        if len(args.reports) == 1 and args.max_slowdown is not None:
            try:  # a saved comparison: the gate's delta must follow from the recorded blocks
                unverifiable = recheck_saved(result, args.reports[0])
            except ValueError as error:
                print(f"error: {error}", file=sys.stderr)
                return 2
            if unverifiable is not None:
                outcome.unverified.append(unverifiable)
        text = markdown_for_comparison(result) + _gate_text(outcome, args.max_slowdown)
    print(text, end="")
    try:
        if args.output is not None:
            result.save(args.output)
        if args.markdown is not None:
            atomic_write_text(args.markdown, text)
    except OSError as error:
        print(
            f"error: cannot write {error.filename or 'the output'}: {error.strerror}",
            file=sys.stderr,
        )
        return 2
    return outcome.exit_code
