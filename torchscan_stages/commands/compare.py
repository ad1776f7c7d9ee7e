"""``python -m torchscan_stages compare``: a Markdown summary for a pull request and a CI gate.

Exit codes: 0 = no owner threshold violated (or none given), 1 = a threshold is violated or
the output check failed, 2 = the inputs could not be read or compared.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..compare.benchmarks import compare_benchmarks
from ..compare.reports import compare_reports
from ..report import (
    AnalysisReport,
    BenchmarkComparison,
    BenchmarkReport,
    MetricResult,
    ReportDiff,
    atomic_write_text,
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
        help="owner threshold: fail when latency is confidently slower than "
        "this ratio (e.g. 1.05); no threshold means no verdict exit",
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


def _fmt(metric: MetricResult) -> str:
    if metric.status == "complete":
        return f"{metric.value:.6g} {metric.unit}"
    if metric.status == "partial":
        return f"≥ {metric.known_value:.6g} {metric.unit} (partial)"
    return "— (unavailable)"


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


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
    lines += [
        "",
        "| metric | baseline | candidate | ratio | CI | verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for delta in result.deltas:
        interval = (
            f"[{_ratio(delta.ci_low)}, {_ratio(delta.ci_high)}]"
            if delta.ci_low is not None
            else "—"
        )
        verdict = f"**{delta.verdict.upper()}**" if delta.withheld else delta.verdict
        lines.append(
            f"| {delta.metric} | {_fmt(delta.baseline)} | {_fmt(delta.candidate)} | "
            f"{_ratio(delta.ratio)} | {interval} | {verdict} |"
        )
    if result.diagnostics:
        lines += ["", "Diagnostics:"]
        lines += [f"- `{d.code}` ({d.severity}): {d.message}" for d in result.diagnostics]
    return "\n".join(lines) + "\n"


def markdown_for_diff(diff: ReportDiff) -> str:
    """Model cost deltas as Markdown (no verdicts: formulas are not noisy)."""
    lines = [
        f"### Model cost: {diff.after_model} vs {diff.before_model}",
        "",
        "| total | before | after | delta | ratio |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, delta in diff.totals.items():
        change = "—" if delta.delta is None else f"{delta.delta:+.6g}"
        lines.append(
            f"| {name} | {_fmt(delta.before)} | {_fmt(delta.after)} | {change} | "
            f"{_ratio(delta.ratio)} |"
        )
    lines += [
        "",
        f"Layers: {len(diff.added)} added, {len(diff.removed)} removed, "
        f"{len(diff.changed)} changed.",
    ]
    if diff.diagnostics:
        lines += ["", "Diagnostics:"]
        lines += [f"- `{d.code}` ({d.severity}): {d.message}" for d in diff.diagnostics]
    return "\n".join(lines) + "\n"


def gate(result: BenchmarkComparison, max_slowdown: float | None) -> list[str]:
    """Violations of the owner's rules; empty when the comparison passes."""
    problems: list[str] = []
    if result.check.performed and result.check.passed is False:
        problems.append("the output check failed")
    if max_slowdown is None:
        return problems
    for delta in result.deltas:
        if delta.metric != "latency.warmed":
            continue
        if delta.verdict == "not_comparable":
            problems.append(f"cannot verify --max-slowdown: not comparable ({delta.reason})")
        elif (
            delta.ratio is not None
            and delta.ci_low is not None
            and delta.ratio > max_slowdown
            and delta.ci_low > 1.0
        ):
            problems.append(
                f"latency ratio {delta.ratio:.4f} exceeds --max-slowdown {max_slowdown} "
                f"(CI [{_ratio(delta.ci_low)}, {_ratio(delta.ci_high)}])"
            )
    return problems


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.max_slowdown is not None and args.max_slowdown < 1.0:
        print(f"error: --max-slowdown must be >= 1.0, got {args.max_slowdown}", file=sys.stderr)
        return 2
    try:
        reports = [load_report(path) for path in args.reports]
        result: BenchmarkComparison | ReportDiff
        if len(reports) == 1 and isinstance(reports[0], BenchmarkComparison):
            result = reports[0]
        elif len(reports) == 2 and all(isinstance(r, AnalysisReport) for r in reports):
            result = compare_reports(reports[0], reports[1])  # type: ignore[arg-type]
        elif len(reports) == 2 and all(isinstance(r, BenchmarkReport) for r in reports):
            options = {} if args.min_effect is None else {"min_effect": args.min_effect}
            result = compare_benchmarks(reports[0], reports[1], **options)  # type: ignore[arg-type]
        else:
            kinds = ", ".join(r.kind for r in reports)
            raise ValueError(
                "expected two analysis reports, two benchmark reports or one "
                f"benchmark_comparison, got: {kinds}"
            )
    except (ValueError, TypeError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if isinstance(result, ReportDiff):
        text = markdown_for_diff(result)
        problems: list[str] = []
    else:
        text = markdown_for_comparison(result)
        problems = gate(result, args.max_slowdown)
    if problems:
        text += "\n**Gate: FAILED**\n" + "".join(f"- {p}\n" for p in problems)
    elif args.max_slowdown is not None:
        text += f"\n**Gate: passed** (--max-slowdown {args.max_slowdown})\n"
    print(text, end="")
    if args.output is not None:
        result.save(args.output)
    if args.markdown is not None:
        atomic_write_text(args.markdown, text)
    return 1 if problems else 0
