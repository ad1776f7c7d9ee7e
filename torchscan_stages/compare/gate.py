"""The CI gate: one decision per comparison, computed from its latency row's verdict.

One rule for the row, its table line and the gate (docs/comparison.md, "The CI gate"): the
gate reads the ``latency.warmed`` row's verdict first and the owner's threshold ``T``
(``--max-slowdown``) only to place a *decided* row against it:

* ``inconclusive``, ``withheld``, ``not_comparable``, or no latency row: **CANNOT VERIFY**
  (exit 3), with the row's own reason; never FAILED, never passed;
* ``slower``: **FAILED** (exit 1) when the ratio is above ``T``; passed when the whole
  interval is at most ``T`` (slower, but within the owner's allowance); otherwise CANNOT
  VERIFY (the ratio is within ``T``, the interval reaches beyond it);
* ``faster`` or ``no_difference``: passed when the interval's upper end is at most ``T``;
  otherwise CANNOT VERIFY.

So the gate can never say more than the row: it fails only a row that says ``slower``, and
passes only a decided row. A failed output check fails the gate (exit 1) whatever the rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..report import BenchmarkComparison, PerformanceDelta
from .recheck import recheck_saved

GATE_METRIC = "latency.warmed"
Outcome = Literal["failed", "passed", "cannot_verify"]
UNDECIDED = ("inconclusive", "withheld", "not_comparable")


@dataclass(frozen=True)
class RowGate:
    """The gate's decision on one latency row, and why (one line)."""

    outcome: Outcome
    reason: str


@dataclass
class GateResult:
    """Violations fail the gate (exit 1); unverifiable thresholds stop it too (exit 3)."""

    violations: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)  # why a decided row is within T

    @property
    def exit_code(self) -> int:
        return 1 if self.violations else 3 if self.unverified else 0

    @property
    def title(self) -> str:
        return "FAILED" if self.violations else "CANNOT VERIFY" if self.unverified else "passed"


def _interval(delta: PerformanceDelta) -> str:
    return f"ratio {delta.ratio:.4g}, CI [{delta.ci_low:.4g}, {delta.ci_high:.4g}]"


def gate_row(delta: PerformanceDelta, max_slowdown: float) -> RowGate:
    """The decision on one latency row: its verdict first, ``T`` only for a decided row."""
    verdict = "withheld" if delta.withheld else delta.verdict
    if verdict in UNDECIDED:
        return RowGate(
            "cannot_verify", f"the comparison could not decide: {verdict}: {delta.reason}"
        )
    if delta.ratio is None or delta.ci_low is None or delta.ci_high is None:
        return RowGate("cannot_verify", f"{verdict} without a ratio interval ({delta.reason})")
    interval, limit = _interval(delta), f"--max-slowdown {max_slowdown}"
    if verdict == "slower" and delta.ratio > max_slowdown:
        return RowGate("failed", f"latency is slower ({interval}), beyond {limit}")
    if verdict in ("slower", "faster", "no_difference") and delta.ci_high <= max_slowdown:
        return RowGate("passed", f"latency is {verdict} ({interval}), within {limit}")
    if verdict in ("slower", "faster", "no_difference"):
        return RowGate(
            "cannot_verify",
            f"latency is {verdict} ({interval}): the interval reaches beyond {limit}; "
            "measure longer or on a quieter host",
        )
    return RowGate("cannot_verify", f"latency row has verdict {verdict!r}, not a timing verdict")


def gate(result: BenchmarkComparison, max_slowdown: float | None) -> GateResult:
    """The owner's rules against one comparison: see the module docstring."""
    outcome = GateResult()
    if result.check.performed and result.check.passed is False:
        outcome.violations.append("the output check failed")
    if max_slowdown is None:
        return outcome
    rows = [delta for delta in result.deltas if delta.metric == GATE_METRIC]
    if not rows:
        outcome.unverified.append(
            "no warmed-latency delta to judge (a side has no latency or no raw blocks)"
        )
    for delta in rows:
        decision = gate_row(delta, max_slowdown)
        if decision.outcome == "failed":
            outcome.violations.append(decision.reason)
        elif decision.outcome == "cannot_verify":
            outcome.unverified.append(decision.reason)
        else:
            outcome.passed.append(decision.reason)
    return outcome


def gate_saved(result: BenchmarkComparison, where: Path, max_slowdown: float | None) -> GateResult:
    """:func:`gate` on a comparison read from ``where``: its latency row must follow from its
    recorded blocks (``ValueError`` for an edited file); one that cannot be recomputed
    cannot be verified."""
    outcome = gate(result, max_slowdown)
    if max_slowdown is not None:
        unverifiable = recheck_saved(result, str(where))
        if unverifiable is not None:
            outcome.unverified.append(unverifiable)
    return outcome


def decide(
    result: BenchmarkComparison, paths: list[Path], max_slowdown: float | None
) -> GateResult:
    """The gate on what the command was given: one saved comparison is rechecked first."""
    if len(paths) == 1:
        return gate_saved(result, paths[0], max_slowdown)
    return gate(result, max_slowdown)
