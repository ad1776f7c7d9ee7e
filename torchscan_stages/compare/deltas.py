"""One PerformanceDelta per metric: latency (judged from its interval), throughput, first
call, peak memory per scope and operator FLOPs; and withholding when the check failed.

The latency verdict follows one rule, shared with the CI gate: faster or slower when the
interval excludes no change and the point ratio is beyond the minimum effect; noise is shown
beside the verdict as a warning, never turned into ``inconclusive``; ``inconclusive`` only
when the interval does not decide (or there are fewer rounds than ``min_blocks``). Saved
reports are judged here from a bootstrap of lower deciles; an interleaved run is judged in
:mod:`.judging` (paired rounds, A/A control, busy-host refusal) with the same verdict rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..report import (
    CheckResult,
    Diagnostic,
    FlopReport,
    MemorySection,
    MetricResult,
    PerformanceDelta,
)
from ..settings import settings_from
from ..stats import quantile, relative_iqr
from .interleave import (
    LOCATION_LEVEL,
    InterleavedRun,
    RatioEstimate,
    latency_verdict,
    ratio_of_locations,
)
from .paired import PairedEstimate, cpu_share, paired_ratio, paired_sides, widened

DEFAULT_MIN_EFFECT = 0.05
DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 2000
DEFAULT_MAX_NOISE = 0.05
DEFAULT_CI_FLOOR = 0.005
DEFAULT_MIN_CPU_SHARE = 0.1  # see docs/comparison.md, "Verdicts under load"


def _not_int(value: object) -> bool:
    """``True`` is an int to Python, not a count of blocks or resamples."""
    return isinstance(value, bool) or not isinstance(value, int)


@dataclass(frozen=True)
class Judge:
    """The owner's decision settings, applied identically to every latency delta."""

    min_effect: float = DEFAULT_MIN_EFFECT
    max_noise: float = DEFAULT_MAX_NOISE
    ci_floor: float = DEFAULT_CI_FLOOR
    min_blocks: int = 10
    confidence: float = DEFAULT_CONFIDENCE
    resamples: int = DEFAULT_RESAMPLES
    seed: int = 0
    aa_control: bool = True
    min_cpu_share: float = DEFAULT_MIN_CPU_SHARE

    def __post_init__(self) -> None:
        for name in ("min_effect", "max_noise", "ci_floor", "confidence", "min_cpu_share"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"{name} must be finite, got {value!r}")
        if not 0.0 <= self.min_effect < 1.0:
            raise ValueError(f"min_effect must be in [0, 1), got {self.min_effect!r}")
        if self.ci_floor < 0.0 or (self.ci_floor > 0.0 and self.ci_floor >= self.min_effect):
            raise ValueError(
                "ci_floor must be in [0, min_effect) so that a real effect can be told apart, "
                f"got ci_floor={self.ci_floor!r} with min_effect={self.min_effect!r}"
            )
        if not self.max_noise > 0.0:
            raise ValueError(f"max_noise must be > 0, got {self.max_noise!r}")
        if not 0.5 <= self.confidence < 1.0:
            raise ValueError(f"confidence must be in [0.5, 1), got {self.confidence!r}")
        if _not_int(self.resamples) or self.resamples < 100:
            raise ValueError(f"resamples must be an int >= 100, got {self.resamples!r}")
        if _not_int(self.min_blocks) or self.min_blocks < 3:
            raise ValueError(f"min_blocks must be an int >= 3, got {self.min_blocks!r}")
        if not 0.0 <= self.min_cpu_share <= 1.0:
            raise ValueError(f"min_cpu_share must be in [0, 1], got {self.min_cpu_share!r}")
        if not isinstance(self.aa_control, bool):
            raise TypeError(f"aa_control must be a bool, got {self.aa_control!r}")

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any] | Judge | None) -> Judge:
        """A Judge from a mapping of its field names (unknown names refused), or as given."""
        return settings_from(cls, options, what="judge options")

    def settings(self) -> dict[str, object]:
        return {
            "min_effect": self.min_effect,
            "max_noise": self.max_noise,
            "ci_floor": self.ci_floor,
            "confidence": self.confidence,
            "resamples": self.resamples,
            "bootstrap_seed": self.seed,
            "min_blocks": self.min_blocks,
            "aa_control": self.aa_control,
            "min_cpu_share": self.min_cpu_share,
            "location": "interleaved: median of per-round ratios (sign-test interval), "
            f"saved reports: quantile {LOCATION_LEVEL} of per-call block averages",
        }

    def settled(self, run: InterleavedRun) -> bool:
        """The adaptive stop: the interval of the undisturbed rounds, widened by the A/A
        control, is narrower than the minimum effect (relative width), and nothing that the
        verdict rule would decline on stands in the way: the workloads got at least
        ``min_cpu_share`` of the wall time as CPU and the A/A control is not itself faster
        or slower. Why keep sampling then: the share and the control are measured over the
        whole run, so a host that calms down lets a run that began in a burst still decide
        (at 2 busy processes 3 of 20 true 1.3x pairs stopped early and were declined). Both
        conditions are blind to which workload ran in which slot, so waiting on them cannot
        favour a direction; the A/B interval's own verdict is never waited for."""
        sides = paired_sides(run, self.min_blocks)
        if sides.undisturbed is not None and sides.undisturbed < self.min_blocks:
            return False
        share = cpu_share(run.traces)
        if share is not None and share < self.min_cpu_share:
            return False
        estimate = paired_ratio(sides.base, sides.cand, confidence=self.confidence)
        control = None
        if sides.control:
            control = paired_ratio(sides.control_base, sides.control, confidence=self.confidence)
            if self._decided(widened(control, None, self.ci_floor)):
                return False
        final = widened(estimate, control, self.ci_floor)
        if final.low is None or final.high is None:
            return False
        return (final.high - final.low) / final.ratio < self.min_effect

    def _decided(self, estimate: PairedEstimate) -> bool:
        """Whether an interval says faster or slower by the verdict rule."""
        if estimate.low is None or estimate.high is None:
            return False
        ratio = RatioEstimate(estimate.ratio, estimate.low, estimate.high, self.confidence, 0, True)
        return latency_verdict(ratio, min_effect=self.min_effect)[0] in ("faster", "slower")


def noise_diagnostic(noise: float, judge: Judge, verdict: str, decided_by: str) -> Diagnostic:
    """``latency_noisy``: shown beside a verdict, never turned into one; it names what
    decided the verdict (``decided_by``: the interval, the rounds, the busy host ...)."""
    return Diagnostic(
        code="latency_noisy",
        severity="warning",
        metric="latency.warmed",
        message=(
            f"block times are noisy (IQR/median up to {noise:.1%}, above max_noise "
            f"{judge.max_noise:.1%}); the verdict '{verdict}' was decided by {decided_by}; "
            "the noise did not change it; the host was probably busy"
        ),
    )


def latency_delta(
    base_blocks: list[float],
    cand_blocks: list[float],
    judge: Judge,
    *,
    paired: bool,
    method: str,
) -> tuple[PerformanceDelta, list[Diagnostic]]:
    """Warmed-latency delta from the interval; noise becomes a warning beside the verdict."""
    estimate = ratio_of_locations(
        base_blocks,
        cand_blocks,
        confidence=judge.confidence,
        resamples=judge.resamples,
        paired=paired,
        seed=judge.seed,
        floor=judge.ci_floor,
    )
    verdict, reason = latency_verdict(estimate, min_effect=judge.min_effect)
    diagnostics: list[Diagnostic] = []
    decided_by = "the interval"
    blocks = min(len(base_blocks), len(cand_blocks))
    if blocks < judge.min_blocks:
        verdict, reason = (
            "inconclusive",
            f"fewer than {judge.min_blocks} rounds ({blocks}); {reason}",
        )
        decided_by = f"the rounds ({blocks}, fewer than min_blocks {judge.min_blocks})"
    noise = max(relative_iqr(base_blocks), relative_iqr(cand_blocks))
    if noise > judge.max_noise:
        reason += f"; noise warning: IQR/median {noise:.1%} > {judge.max_noise:.1%}"
        diagnostics.append(noise_diagnostic(noise, judge, verdict, decided_by))
    latency_method = f"{method}_lower_decile"

    def result(blocks: list[float]) -> MetricResult:
        return MetricResult.complete(
            quantile(blocks, LOCATION_LEVEL),
            unit="s",
            scope="warmed_block_average",
            method=latency_method,
        )

    delta = PerformanceDelta(
        metric="latency.warmed",
        unit="s",
        scope="warmed_block_average",
        method=latency_method,
        baseline=result(base_blocks),
        candidate=result(cand_blocks),
        ratio=estimate.ratio,
        ci_low=estimate.low,
        ci_high=estimate.high,
        confidence=estimate.confidence,
        verdict=verdict,  # type: ignore[arg-type]
        reason=reason,
    )
    return delta, diagnostics


def throughput_delta(latency: PerformanceDelta, work_units: float, unit: str) -> PerformanceDelta:
    """Throughput = work_units / latency location: its ratio is the inverse of latency's."""
    assert latency.baseline.value and latency.candidate.value and latency.ratio
    paired = latency.method.endswith("_paired_median")
    method = f"work_units_per_{'paired_median' if paired else 'lower_decile'}_latency"
    scope = "warmed_block_average"

    def result(seconds: float) -> MetricResult:
        return MetricResult.complete(
            work_units / seconds, unit=f"{unit}/s", scope=scope, method=method
        )

    return PerformanceDelta(
        metric="throughput",
        unit=f"{unit}/s",
        scope=scope,
        method=method,
        baseline=result(float(latency.baseline.value)),
        candidate=result(float(latency.candidate.value)),
        ratio=1.0 / latency.ratio,
        ci_low=1.0 / latency.ci_high if latency.ci_high else None,
        ci_high=1.0 / latency.ci_low if latency.ci_low else None,
        confidence=latency.confidence,
        verdict=latency.verdict,
        reason=latency.reason,
    )


def first_call_delta(base: float, cand: float, method: str) -> PerformanceDelta:
    def result(seconds: float) -> MetricResult:
        return MetricResult.complete(seconds, unit="s", scope="first_call", method=method)

    return PerformanceDelta(
        metric="latency.first_call",
        unit="s",
        scope="first_call",
        method=method,
        baseline=result(base),
        candidate=result(cand),
        ratio=cand / base if base > 0 else None,
        verdict="inconclusive",
        reason="one sample per side: first-call latency is shown, not judged",
    )


def _count_deltas(
    prefix: str,
    baseline: list[MetricResult],
    candidate: list[MetricResult],
    *,
    min_effect: float,
) -> list[PerformanceDelta]:
    """Deltas of single deterministic measurements (peak memory per scope, operator FLOPs).

    Only results of the same scope and method are paired, and a ratio is formed only when
    both are complete; anything else is ``inconclusive`` with the reason.
    """
    deltas: list[PerformanceDelta] = []
    for base in baseline:
        match = [c for c in candidate if (c.scope, c.method) == (base.scope, base.method)]
        if not match:
            continue
        cand = match[0]
        if base.status != "complete" or cand.status != "complete":
            verdict, ratio, reason = "inconclusive", None, "a side is not complete"
        else:
            assert base.value is not None and cand.value is not None
            ratio = cand.value / base.value if base.value > 0 else None
            if ratio is None:
                verdict, reason = "inconclusive", f"baseline is 0 {base.unit}"
            elif abs(ratio - 1.0) <= min_effect:
                verdict, reason = "no_difference", f"within the minimum effect {min_effect:.1%}"
            else:
                verdict = "increased" if ratio > 1.0 else "decreased"
                reason = "single deterministic measurement per side"
        deltas.append(
            PerformanceDelta(
                metric=f"{prefix}.{base.scope}",
                unit=base.unit,
                scope=base.scope,
                method=base.method,
                baseline=base,
                candidate=cand,
                ratio=ratio,
                verdict=verdict,  # type: ignore[arg-type]
                reason=reason,
            )
        )
    return deltas


def memory_deltas(
    baseline: MemorySection | None, candidate: MemorySection | None, *, min_effect: float
) -> list[PerformanceDelta]:
    """Peak-memory deltas per scope (never across scopes)."""
    if baseline is None or candidate is None:
        return []
    return _count_deltas("memory", baseline.results, candidate.results, min_effect=min_effect)


def flop_deltas(
    baseline: FlopReport | None, candidate: FlopReport | None, *, min_effect: float
) -> list[PerformanceDelta]:
    """Operator-FLOP deltas of one call (same scope and method only): the total, and its
    tensor-product share when both reports carry it (each compared only with its own kind)."""
    if baseline is None or candidate is None:
        return []
    deltas = _count_deltas("flops", [baseline.total], [candidate.total], min_effect=min_effect)
    if baseline.product_flops is not None and candidate.product_flops is not None:
        deltas += _count_deltas(
            "product_flops",
            [baseline.product_flops],
            [candidate.product_flops],
            min_effect=min_effect,
        )
    return deltas


def withhold(deltas: list[PerformanceDelta], check: CheckResult) -> list[PerformanceDelta]:
    why = check.error or check.detail or "the owner's check returned False"
    return [
        delta.model_copy(
            update={
                "verdict": "withheld",
                "withheld": True,
                "reason": f"output check failed ({why}); was: {delta.verdict}",
            }
        )
        for delta in deltas
    ]
