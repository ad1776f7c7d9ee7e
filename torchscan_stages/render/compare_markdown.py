"""The compare command's Markdown (a pull request's comment, a CI log): the comparison
table, the model-cost diff table and the gate's block. Layout only; the decisions come in
(compare/gate.py decides, commands/compare.py wires)."""

from __future__ import annotations

from ..report import BenchmarkComparison, ReportDiff
from .text import diagnostic_text, interval_text, markdown_table, metric_text, ratio_text
from .verdicts import short_reason, statistic_text, verdict_label


def _check_lines(result: BenchmarkComparison) -> list[str]:
    check = result.check
    if not check.performed:
        line = "**Output check: not performed** (saved reports were compared)"
    elif check.passed:
        line = "**Output check: passed**"
    else:
        line = "**Output check: FAILED** — every performance delta is withheld"
    lines = [line]
    for label, value in (
        ("detail", check.detail),
        ("tolerance", check.tolerance),
        ("error", check.error),
    ):
        if value is not None:
            lines.append(f"- {label}: `{value}`")
    return lines


def _rows_markdown(result: BenchmarkComparison) -> list[str]:
    """One line a row; the statistic named per row; full reasons behind a disclosure."""
    rows = []
    for delta in result.deltas:
        label = verdict_label(delta)
        rows.append(
            [
                delta.metric,
                statistic_text(delta),
                metric_text(delta.baseline),
                metric_text(delta.candidate),
                ratio_text(delta.ratio),
                interval_text(delta.ci_low, delta.ci_high),
                f"**{label.upper()}**" if label == "withheld" else label,
                short_reason(delta.reason) or "—",
            ]
        )
    headers = ["metric", "statistic", "baseline", "candidate", "ratio", "CI", "verdict", "why"]
    lines = ["", *markdown_table(headers, rows)]
    full = [d for d in result.deltas if d.reason and short_reason(d.reason) != d.reason]
    if full:
        lines += ["", "<details><summary>Reasons in full</summary>", ""]
        lines += [f"- `{d.metric}`: {d.reason}" for d in full]
        lines += ["", "</details>"]
    return lines


def _pressure_lines(result: BenchmarkComparison, host_line: str | None) -> list[str]:
    """What the host did and how many rounds the verdict could use (interleaved runs)."""
    lines: list[str] = []
    paired = result.settings.get("paired")
    if isinstance(paired, dict) and paired.get("rounds"):
        share = paired.get("cpu_share")
        text = f"Rounds: {paired['rounds']}, judged on {paired.get('rounds_used')}"
        if paired.get("undisturbed_rounds") is not None:
            text += f" ({paired['undisturbed_rounds']} ran both blocks undisturbed)"
        if share is not None:
            text += f"; the workloads got {share:.0%} of their blocks' wall time as CPU time"
        if paired.get("aa_control_ratio") is not None:
            text += f"; A/A control ratio {paired['aa_control_ratio']:.4f}"
        if paired.get("disturbance_bound") is not None:
            text += f"; the load explains at most ×{paired['disturbance_bound']:.2f}"
        lines += ["", text + "."]
    if host_line:
        lines += ["", f"Host: {host_line}."]
    return lines


def comparison_markdown(result: BenchmarkComparison, host_line: str | None = None) -> str:
    """The comparison as Markdown: check first, then one line a row, then the host."""
    title = f"### {result.candidate_name or 'candidate'} vs {result.baseline_name or 'baseline'}"
    lines = [title, "", *_check_lines(result), *_rows_markdown(result)]
    if "stop_reason" in result.settings:
        lines += ["", f"Sampling stopped by: `{result.settings['stop_reason']}`."]
    lines += _pressure_lines(result, host_line)
    if result.diagnostics:
        lines += ["", "Diagnostics:"]
        lines += [f"- {diagnostic_text(d, markdown=True)}" for d in result.diagnostics]
    return "\n".join(lines) + "\n"


def diff_markdown(diff: ReportDiff) -> str:
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


def gate_markdown(
    violations: list[str], unverified: list[str], passed: list[str], max_slowdown: float | None
) -> str:
    """The gate's block, ``**Gate: FAILED | CANNOT VERIFY | passed**`` and one line per
    reason; "" when no threshold was given and nothing failed."""
    if violations:
        text = "\n**Gate: FAILED**\n" + "".join(f"- {p}\n" for p in violations)
        return text + "".join(f"- cannot verify: {p}\n" for p in unverified)
    if unverified:
        return "\n**Gate: CANNOT VERIFY**\n" + "".join(f"- {p}\n" for p in unverified)
    if max_slowdown is not None:
        head = f"\n**Gate: passed** (--max-slowdown {max_slowdown})\n"
        return head + "".join(f"- {p}\n" for p in passed)
    return ""


__all__ = ["comparison_markdown", "diff_markdown", "gate_markdown"]
