"""Stage ``compare``: the configured candidate against its baseline.

Writes ``reports/compare.json`` (BenchmarkComparison from compare_benchmarks, with the
owner's output check) and ``reports/compare_diff.json`` (ReportDiff of the two models'
crawl reports). The tolerance is the owner's (``candidate.tolerance``, no default). A
candidate that cannot run here (e.g. torch.compile without a working compiler) is recorded
as a ``candidate_failed`` diagnostic with no numbers, never as a crash or a fabricated delta.
All of it is one library call: :func:`pipeline.candidate.compare_configured_candidate`.
"""

from __future__ import annotations

from typing import Any

from ..pipeline.runner import WORKLOAD_KEYS, StageContext, stage_main

KEYS = (*WORKLOAD_KEYS, "compare", "candidate")


WRITES = (
    "reports/compare.json",
    "reports/compare_diff.json",
    "metrics/compare.json",
    "metrics/compare.evidence.json",
)


def verdict_text(delta: Any) -> str:
    """``inconclusive: fewer than 10 rounds (5)``, ``slower (loaded host)``: the verdict as
    the page shows it, with an undecided row's short reason (render.verdicts)."""
    from ..render.verdicts import short_reason, verdict_label

    label = verdict_label(delta)
    if delta.verdict == "inconclusive" and delta.reason:
        return f"{label}: {short_reason(delta.reason)}"
    return label


def check_text(check: Any, limit: int = 300) -> str:
    """``check passed``, ``check failed: <detail>``, or the candidate's own failure
    (``candidate 'compiled' failed: BackendCompilerFailed: ...``): the stage line names why."""
    if check.error:
        return check.error if len(check.error) <= limit else check.error[: limit - 3] + "..."
    if check.passed:
        return "check passed"
    if check.passed is False:
        return f"check failed: {check.detail}" if check.detail else "check failed"
    return "check not performed"


def compile_text(record: Any) -> str:
    """``compile (first call) 12.3 s, inductor: 1 frame compiled, 0 after``: the compile
    cost on the stage line, apart from the warmed ratio."""
    first = record.first_call
    seconds = f"{first.value:.3g} s" if first.value is not None else first.status
    return (
        f"compile (first call) {seconds}, {record.backend}: "
        f"{record.frames_compiled_first_call} frame(s) compiled, "
        f"{record.frames_compiled_after} after"
    )


def cpu_has_bf16_matrix_units(cpuinfo: str | None = None) -> bool | None:
    """AMX-BF16 or AVX512-BF16 in /proc/cpuinfo's flags; None where it cannot be read."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as handle:
                cpuinfo = handle.read()
        except OSError:
            return None
    flags = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "")
    if not flags:
        return None
    names = set(flags.split(":", 1)[-1].split())
    return bool(names & {"amx_bf16", "avx512_bf16"})


def bf16_cpu_note(config: Any, cpuinfo: str | None = None) -> str:
    """Why a bf16 candidate on this CPU is expected to be slower (empty when not the case)."""
    candidate = config.candidate
    precision = getattr(candidate, "precision", None) if candidate is not None else None
    if precision is None or precision.dtype != "bfloat16" or config.device.type != "cpu":
        return ""
    if cpu_has_bf16_matrix_units(cpuinfo) is not False:
        return ""
    return (
        "note: bf16 on a CPU without bf16 matrix units (no AMX-BF16/AVX512-BF16 flag): "
        "expect the candidate to be slower, not faster"
    )


def with_bf16_note(comparison: Any, note: str) -> Any:
    """The comparison with :func:`bf16_cpu_note` as an info diagnostic: its page says it too."""
    from ..report import Diagnostic

    diagnostic = Diagnostic(
        code="bf16_without_matrix_units",
        severity="info",
        metric="latency.warmed",
        message=note.removeprefix("note: "),
    )
    return comparison.model_copy(update={"diagnostics": [*comparison.diagnostics, diagnostic]})


def run(ctx: StageContext) -> None:
    from ..pipeline.candidate import compare_configured_candidate

    result = compare_configured_candidate(ctx.config, timed=ctx.timed)
    comparison = result.comparison
    ctx.headline = [check_text(comparison.check)] + [
        f"{d.metric} ratio {d.ratio:.3g} ({verdict_text(d)})" for d in comparison.deltas if d.ratio
    ]
    if comparison.compile is not None:
        ctx.headline.append(compile_text(comparison.compile))
    note = bf16_cpu_note(ctx.config)
    if note:
        ctx.headline.append(note)
        comparison = with_bf16_note(comparison, note)
    from ..pipeline.evidence import comparison_evidence

    ctx.write_report(comparison)
    ctx.write_report(result.diff, "compare_diff")
    ctx.write_metrics(result.metrics(), evidence=comparison_evidence(comparison))


if __name__ == "__main__":
    stage_main("compare", KEYS, run, required=("candidate",), about=__doc__ or "", writes=WRITES)
