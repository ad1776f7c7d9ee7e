"""Verdicts of an interleaved run: latency from undisturbed paired rounds, widened by the
in-run A/A control, refused when the host was too busy; CPU time as a separate metric.

The rule (docs/comparison.md, "Verdicts under load"), applied in this order:

1. fewer than ``min_blocks`` rounds: ``inconclusive``;
2. the host was too busy: the workload got less than ``min_cpu_share`` of its blocks' wall
   time as CPU time, or fewer than ``min_blocks`` rounds ran without an involuntary context
   switch: ``inconclusive`` with a ``host_too_busy`` diagnostic that names the pressure;
3. the A/A control (baseline against its own second block, judged by the same rule) is
   itself ``faster`` or ``slower``: ``inconclusive`` (the run cannot tell a workload from
   itself, so it cannot tell two apart);
4. otherwise the verdict of :func:`.interleave.latency_verdict` on the sign-test interval of
   the undisturbed rounds, widened by the control's offset from 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..measure.host import pressure_text
from ..report import Diagnostic, HostState, MetricResult, PerformanceDelta
from .deltas import Judge
from .interleave import InterleavedRun, RatioEstimate, latency_verdict
from .loaded import Disturbance, beyond, disturbance, within_text
from .paired import PairedEstimate, cpu_share, paired_ratio, paired_sides, widened

SCOPE = "warmed_block_average"


@dataclass
class PairedOutcome:
    """The deltas of one interleaved run, its diagnostics and what the rule saw."""

    latency: PerformanceDelta
    control: PerformanceDelta | None
    cpu_time: PerformanceDelta | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def _as_ratio(estimate: PairedEstimate) -> RatioEstimate:
    low = estimate.low if estimate.low is not None else 0.0
    high = estimate.high if estimate.high is not None else float("inf")
    return RatioEstimate(estimate.ratio, low, high, estimate.confidence, 0, True, 0.5)


def _middle(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _delta(
    metric: str,
    method: str,
    sides: tuple[list[float], list[float]],
    estimate: PairedEstimate,
    verdict: tuple[str, str],
) -> PerformanceDelta:
    # the baseline's median block, and the candidate at the same conditions: that median
    # times the paired ratio (so candidate / baseline is the ratio that was judged; the
    # candidate's own median over other rounds would mix in the host's changes)
    base = _middle(sides[0])
    return PerformanceDelta(
        metric=metric,
        unit="s",
        scope=SCOPE,
        method=method,
        baseline=MetricResult.complete(base, unit="s", scope=SCOPE, method=method),
        candidate=MetricResult.complete(
            base * estimate.ratio, unit="s", scope=SCOPE, method=method
        ),
        ratio=estimate.ratio,
        ci_low=estimate.low,
        ci_high=estimate.high,
        confidence=estimate.confidence,
        verdict=verdict[0],  # type: ignore[arg-type]
        reason=verdict[1],
    )


def _judged(
    estimate: PairedEstimate, judge: Judge, control: PairedEstimate | None
) -> tuple[PairedEstimate, tuple[str, str]]:
    final = widened(estimate, control, judge.ci_floor)
    if final.low is None or final.high is None:
        return final, ("inconclusive", f"{final.rounds} rounds are too few for an interval")
    return final, latency_verdict(_as_ratio(final), min_effect=judge.min_effect)


def _busy_reason(
    share: float | None, clean: int | None, rounds: int, judge: Judge, host: HostState | None
) -> str | None:
    """Why the host was too busy for a verdict, naming the measured pressure; None if not.
    The first clause (up to "; ") is short: it is what a page's row shows."""
    why: list[str] = []
    if share is not None and share < judge.min_cpu_share:
        why.append(
            f"the workloads got {share:.0%} of the wall time as CPU "
            f"(min_cpu_share {judge.min_cpu_share:.0%})"
        )
    if clean is not None and clean < judge.min_blocks:
        why.append(
            f"only {clean} of {rounds} rounds ran both blocks undisturbed "
            f"(min_blocks {judge.min_blocks})"
        )
    if not why:
        return None
    host_line = f"; host: {pressure_text(host)}" if host is not None else ""
    return "host too busy: " + "; ".join(why) + host_line


def _declined_by_load(
    estimate: PairedEstimate,
    verdict: tuple[str, str],
    busy: str,
    found: Disturbance | None,
    judge: Judge,
) -> tuple[str, str]:
    """A busy host's verdict: slower/faster with a "loaded host" note when the interval lies
    beyond the measured disturbance (:mod:`.loaded`), else inconclusive with why."""
    large = beyond(estimate, found, judge.min_effect) if found is not None else None
    if large is not None:
        return large[0], f"{large[1]}; {busy}"
    return (
        "inconclusive",
        f"{busy}; was: {verdict[0]}, {verdict[1]}; {within_text(estimate, found)}",
    )


def _direction(estimate: PairedEstimate) -> str:
    return "slower" if estimate.ratio >= 1.0 else "faster"


def _busy_diagnostic(busy: str, verdict: tuple[str, str]) -> Diagnostic:
    """``host_too_busy`` when the load declined the verdict; ``verdict_on_loaded_host`` when
    the effect was beyond it (the verdict stands, with the pressure beside it)."""
    if verdict[0] in ("slower", "faster"):
        return Diagnostic(
            code="verdict_on_loaded_host",
            severity="warning",
            metric="latency.warmed",
            message=f"{verdict[0]} although {busy}: the effect lies beyond what the measured "
            "load can explain (docs/comparison.md, 'Large effects on a loaded host')",
        )
    return Diagnostic(
        code="host_too_busy", severity="warning", metric="latency.warmed", message=busy
    )


def paired_deltas(
    run: InterleavedRun, judge: Judge, method: str, host: HostState | None
) -> PairedOutcome:
    """Latency (and, when probed, CPU time) deltas of an interleaved run by the rule above."""
    rounds = len(run.baseline_blocks)
    sides = paired_sides(run, judge.min_blocks)
    share = cpu_share(run.traces)
    busy = _busy_reason(share, sides.undisturbed, rounds, judge, host)
    base, cand = sides.base, sides.cand
    control_sides = (sides.control_base, sides.control)
    control_est = None
    if sides.control:
        control_est = paired_ratio(*control_sides, confidence=judge.confidence)
    control_final, control_verdict = (
        _judged(control_est, judge, None) if control_est else (None, None)
    )
    estimate, verdict = _judged(
        paired_ratio(base, cand, confidence=judge.confidence), judge, control_est
    )
    diagnostics: list[Diagnostic] = []
    found = None
    decided_by = "the interval"
    if rounds < judge.min_blocks:
        decided_by = f"the rounds ({rounds}, fewer than min_blocks {judge.min_blocks})"
        verdict = (
            "inconclusive",
            f"fewer than {judge.min_blocks} rounds ({rounds}); {verdict[1]}",
        )
    elif busy is not None:
        traces = (run.baseline_trace, run.candidate_trace)
        found = disturbance(sides, traces, judge.min_blocks, judge.confidence)
        verdict = _declined_by_load(estimate, verdict, busy, found, judge)
        diagnostics.append(_busy_diagnostic(busy, verdict))
        decided = verdict[0] in ("slower", "faster")
        decided_by = "the interval against the measured load" if decided else "the busy host"
    elif control_verdict is not None and control_verdict[0] in ("faster", "slower"):
        decided_by = "the A/A control"
        verdict = (
            "inconclusive",
            f"the A/A control (baseline against itself) came out {control_verdict[0]}; "
            f"the run cannot tell a workload from itself ({control_verdict[1]}); was: "
            f"{verdict[0]}, {verdict[1]}",
        )
    if control_est is not None:
        verdict = (verdict[0], f"{verdict[1]}; A/A control ratio {control_est.ratio:.4f}")
    latency_method = f"{method}_paired_median"
    latency = _delta("latency.warmed", latency_method, (base, cand), estimate, verdict)
    control = None
    if control_final is not None and control_verdict is not None:
        control = _delta(
            "latency.aa_control", latency_method, control_sides, control_final, control_verdict
        )
    summary = {
        "rounds": rounds,
        "undisturbed_rounds": sides.undisturbed,
        "rounds_used": len(base),
        "cpu_share": round(share, 4) if share is not None else None,
        "host_too_busy": busy is not None,
        "aa_control_ratio": control_est.ratio if control_est else None,
        "disturbance_bound": round(found.bound(_direction(estimate)), 4) if found else None,
        "loaded_host_verdict": busy is not None and verdict[0] in ("slower", "faster"),
        "decided_by": decided_by,
    }
    cpu = _cpu_delta(run, judge)
    return PairedOutcome(latency, control, cpu, diagnostics, summary)


def _cpu_delta(run: InterleavedRun, judge: Judge) -> PerformanceDelta | None:
    """Process CPU time per call, paired the same way over every round (CPU time does not
    grow while the process waits for a core); a separate metric, never latency."""
    traces = (run.baseline_trace, run.candidate_trace, run.control_trace)
    rounds = len(run.baseline_blocks)
    if rounds == 0 or any(len(t.cpu_s) != rounds for t in traces[:2]):
        return None
    calls = (run.baseline_calls_per_block, run.candidate_calls_per_block)
    base = [cpu / calls[0] for cpu in traces[0].cpu_s]
    cand = [cpu / calls[1] for cpu in traces[1].cpu_s]
    if min(base) <= 0 or min(cand) <= 0:
        return None
    control_est = None
    if len(traces[2].cpu_s) == rounds:
        control = [cpu / calls[0] for cpu in traces[2].cpu_s]
        if min(control) > 0:
            control_est = paired_ratio(base, control, confidence=judge.confidence)
    estimate, verdict = _judged(
        paired_ratio(base, cand, confidence=judge.confidence), judge, control_est
    )
    if rounds < judge.min_blocks:
        verdict = ("inconclusive", f"fewer than {judge.min_blocks} rounds ({rounds}); {verdict[1]}")
    if control_est is not None:
        _, control_verdict = _judged(control_est, judge, None)
        if control_verdict[0] in ("faster", "slower"):
            verdict = ("inconclusive", f"the CPU-time A/A control came out {control_verdict[0]}")
    return _delta(
        "cpu_time.warmed", "process_cpu_time_paired_median", (base, cand), estimate, verdict
    )
