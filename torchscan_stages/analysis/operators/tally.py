"""A counter's per-owner records summed into the report's totals, diagnostics and modules.

Plain data in, report parts out: nothing here runs under the dispatch hook. The counter
(``counter.py``) fills one :class:`OwnerOps` per innermost owner while the workload runs;
after it, :func:`tally` sums them by operator, and the helpers below turn the sums into the
``uncounted_operator`` / ``unclassified_operator`` diagnostics and the per-module results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ...report import Diagnostic, MetricResult
from .lookup import METHOD, UNIT, OwnerKey


@dataclass(slots=True)
class OwnerOps:
    """Operators dispatched while one owner was innermost (``None``: no owner active)."""

    flops: int = 0
    product_flops: int = 0
    counted_calls: dict[str, int] = field(default_factory=dict)
    ignored_calls: dict[str, int] = field(default_factory=dict)
    uncounted_calls: dict[str, int] = field(default_factory=dict)
    unclassified_calls: dict[str, int] = field(default_factory=dict)
    op_flops: dict[str, int] = field(default_factory=dict)
    # zero-FLOP operators with an elements-moved formula (operator_formulas.MOVED): their sum
    moved_elements: int = 0
    moved_calls: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.uncounted_calls


@dataclass(slots=True)
class Tally:
    """A counter's owners summed: totals, and calls / FLOPs per operator name."""

    flops: int = 0
    products: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    op_flops: dict[str, int] = field(default_factory=dict)
    uncounted: dict[str, int] = field(default_factory=dict)
    unclassified: dict[str, int] = field(default_factory=dict)
    ignored: dict[str, int] = field(default_factory=dict)

    def total(self, scope: str) -> MetricResult:
        if self.uncounted:
            return MetricResult.partial(self.flops, unit=UNIT, scope=scope, method=METHOD)
        return MetricResult.complete(self.flops, unit=UNIT, scope=scope, method=METHOD)

    def product_total(self, scope: str) -> MetricResult:
        if self.uncounted or self.unclassified:
            return MetricResult.partial(self.products, unit=UNIT, scope=scope, method=METHOD)
        return MetricResult.complete(self.products, unit=UNIT, scope=scope, method=METHOD)


def tally(owners: Iterable[OwnerOps]) -> Tally:
    """Every owner's counts summed by operator, in one pass."""
    sums = Tally()
    calls, op_flops, uncounted = sums.calls, sums.op_flops, sums.uncounted
    for ops in owners:
        sums.flops += ops.flops
        sums.products += ops.product_flops
        for op, count in ops.counted_calls.items():
            calls[op] = calls.get(op, 0) + count
            op_flops[op] = op_flops.get(op, 0) + ops.op_flops.get(op, 0)
        if ops.uncounted_calls:
            for op, count in ops.uncounted_calls.items():
                uncounted[op] = uncounted.get(op, 0) + count
        if ops.unclassified_calls:
            for op, count in ops.unclassified_calls.items():
                sums.unclassified[op] = sums.unclassified.get(op, 0) + count
        for op, count in ops.ignored_calls.items():
            sums.ignored[op] = sums.ignored.get(op, 0) + count
    return sums


def check_name(name: object) -> None:
    """A report's ``name``: a str or None; TypeError otherwise."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, got {type(name).__name__} {name!r}")


def uncounted_diagnostics(
    calls: dict[str, int],
    metric: str,
    overloads_of: Mapping[str, set[str]],
    formula_errors: Mapping[str, str],
) -> list[Diagnostic]:
    """One ``uncounted_operator`` diagnostic per packet without a (working) formula.

    ``overloads_of``: packet name -> the overloads that ran uncounted; ``formula_errors``:
    overload -> why its formula failed (absent: it has none).
    """
    diagnostics = []
    for name in sorted(calls):
        overloads = sorted(overloads_of.get(name, ()))
        errors = [f"{o}: {formula_errors[o]}" for o in overloads if o in formula_errors]
        if errors:
            why = "its formula failed (" + "; ".join(errors) + ")"
        else:
            why = "it has no FLOP formula and is not a known zero-FLOP operator"
        diagnostics.append(
            Diagnostic(
                code="uncounted_operator",
                severity="warning",
                metric=metric,
                operator=name,
                count=calls[name],
                message=(
                    f"{name} ({', '.join(overloads)}) ran {calls[name]} time(s) and was not "
                    f"counted: {why}; the total is a lower bound. If the count is known, "
                    f"pass custom_mapping={{torch.ops.{name}: formula}}."
                ),
            )
        )
    return diagnostics


def unclassified_diagnostics(calls: dict[str, int]) -> list[Diagnostic]:
    """One ``unclassified_operator`` diagnostic per custom formula of unknown product share."""
    return [
        Diagnostic(
            code="unclassified_operator",
            severity="info",
            metric="product_flops",
            operator=name,
            count=calls[name],
            message=(
                f"{name} ran {calls[name]} time(s) with a formula from custom_mapping or "
                "torch's register_flop_formula that returned a plain count; how much of it "
                "is tensor products is unknown, so product_flops is a lower bound (the "
                "total is unaffected). Return Flops(products, other) from the formula "
                "(torchscan_stages.analysis.operators.Flops) to declare it."
            ),
        )
        for name in sorted(calls)
    ]


def by_module(
    owners: Mapping[OwnerKey | None, OwnerOps], scope: str, rollup: bool
) -> dict[str, MetricResult]:
    """One FLOPs result per owner key (``rollup``: each key also holds its descendants')."""
    sums: dict[str, list[int]] = {}  # key -> [flops, uncounted calls]
    for key, ops in owners.items():
        if key is not None:
            missing = sum(ops.uncounted_calls.values()) if ops.uncounted_calls else 0
            sums[key] = [ops.flops, missing]
    if rollup:
        roll_up(sums)
    made: dict[tuple[int, bool], MetricResult] = {}  # repeated blocks repeat their sums
    out: dict[str, MetricResult] = {}
    for key, (flops, missing) in sorted(sums.items()):
        result = made.get((flops, missing == 0))
        if result is None:
            result = made[flops, missing == 0] = (
                MetricResult.complete(flops, unit=UNIT, scope=scope, method=METHOD)
                if missing == 0
                else MetricResult.partial(flops, unit=UNIT, scope=scope, method=METHOD)
            )
        out[key] = result
    return out


def roll_up(sums: dict[str, list[int]]) -> None:
    """Add every dotted key's sums into its ancestors (``a`` gets ``a.b`` and ``a.b.c``).

    Deepest keys first, one parent step each: a key's sums are final before they are passed
    up, so the work is one addition per key rather than one per ancestor per key.
    """
    by_depth: dict[int, list[str]] = {}
    for key in sums:
        by_depth.setdefault(key.count("."), []).append(key)
    for depth in range(max(by_depth, default=0), 0, -1):
        for key in by_depth.get(depth, ()):
            parent = key.rpartition(".")[0]
            acc = sums.get(parent)
            if acc is None:
                acc = sums[parent] = [0, 0]
                by_depth.setdefault(depth - 1, []).append(parent)
            child = sums[key]
            acc[0] += child[0]
            acc[1] += child[1]
