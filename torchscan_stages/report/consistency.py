"""Cross-field rules a loaded report must satisfy: consistent by construction.

Each field of a report can be valid on its own while the report as a whole is impossible: an
interval whose low end is above its high end, a ratio that its own baseline and candidate
values do not give, a "faster" verdict whose interval says slower, totals that contradict
the root record, two records claiming one call. Such a file was edited or damaged; the
report models refuse it (``ValueError`` naming the field), so the page, ``compare`` and the
gate never decide on it. Imports only the metric layer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .metric import MetricResult

# a ratio recomputed from its two recorded values: equal up to float rounding
RATIO_RTOL = 1e-6
ROOT_SUMMED = ("module_flops", "macs", "dmas")


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=RATIO_RTOL, abs_tol=1e-300)


def check_delta(delta: Any) -> None:
    """A PerformanceDelta's interval, ratio and verdict agree with each other and its values."""
    ratio, low, high = delta.ratio, delta.ci_low, delta.ci_high
    if low is not None and high is not None and low > high:
        raise ValueError(f"{delta.metric}: ci_low {low!r} is above ci_high {high!r}")
    if ratio is not None:
        if low is not None and ratio < low and not _close(ratio, low):
            raise ValueError(f"{delta.metric}: ratio {ratio!r} is below ci_low {low!r}")
        if high is not None and ratio > high and not _close(ratio, high):
            raise ValueError(f"{delta.metric}: ratio {ratio!r} is above ci_high {high!r}")
        base, cand = delta.baseline, delta.candidate
        if base.is_complete and cand.is_complete and base.value:
            given = float(cand.value) / float(base.value)
            if not _close(ratio, given):
                raise ValueError(
                    f"{delta.metric}: ratio {ratio!r} is not candidate / baseline "
                    f"({cand.value!r} / {base.value!r} = {given!r})"
                )
    _check_verdict(delta)


def _check_verdict(delta: Any) -> None:
    """A decided verdict must point where its ratio and interval point. Slower means a
    latency ratio above 1 but a throughput (``/s``) ratio below 1."""
    verdict, ratio, low, high = delta.verdict, delta.ratio, delta.ci_low, delta.ci_high
    rate = str(delta.unit).endswith("/s")
    up = {"slower": not rate, "faster": rate, "increased": True, "decreased": False}
    if verdict in up:
        above = up[verdict]
        decided = verdict in ("slower", "faster")  # from an interval, when one is recorded
        if above:
            bad = ratio is None or ratio <= 1.0 or (decided and low is not None and low <= 1.0)
            need = "a ratio above 1" + (" and ci_low > 1" if decided else "")
        else:
            bad = ratio is None or ratio >= 1.0 or (decided and high is not None and high >= 1.0)
            need = "a ratio below 1" + (" and ci_high < 1" if decided else "")
    else:  # no_difference depends on the comparison's min_effect: the gate recomputes it
        return
    if bad:
        raise ValueError(
            f"{delta.metric}: verdict {verdict!r} needs {need} (ratio {ratio!r}, CI "
            f"[{low!r}, {high!r}])"
        )


def check_analysis(layers: Sequence[Any], totals: Any) -> None:
    """Records: unique (path, call_index), the root module's first call at depth 0; the totals
    of module FLOPs, MACs and DMAs equal to the sum over the depth-0 records (a re-entered
    root call is nested deeper: it is inside the first call's sum)."""
    _check_parameters(layers, totals)
    if not layers:
        return
    seen: set[tuple[str, int]] = set()
    for index, layer in enumerate(layers):
        key = (layer.path, layer.call_index)
        if key in seen:
            raise ValueError(
                f"layers.{index}: a second record of path {layer.path!r} call_index "
                f"{layer.call_index} (each call has one record)"
            )
        seen.add(key)
        if layer.call_index < 0:
            raise ValueError(f"layers.{index}.call_index: {layer.call_index} is negative")
        # the module crawled itself; a later call of it inside its own forward (a module
        # that calls itself) is nested one level below the call that made it
        root = layer.path == "" and layer.call_index == 0
        if layer.depth < 0 or (root and layer.depth != 0):
            raise ValueError(
                f"layers.{index}: depth {layer.depth} of path {layer.path!r}; expected depth "
                f"{'0 (the root module)' if root else '>= 0'}"
            )
    if ("", 0) not in seen and any(path == "" for path, _ in seen):
        raise ValueError("layers: calls of the root module without its first (call_index 0)")
    roots = [layer for layer in layers if layer.depth == 0]
    if not roots:  # records of a part of a model (no root call recorded): nothing to sum
        return
    for name in ROOT_SUMMED:
        total: MetricResult = getattr(totals, name)
        parts = [getattr(layer.metrics, name) for layer in roots]
        if total.is_complete and all(p.is_complete for p in parts):
            summed = sum(p.value for p in parts)
            if total.value != summed:
                raise ValueError(
                    f"totals.{name}: {total.value!r} contradicts the root record(s), which "
                    f"sum to {summed!r}"
                )
        elif total.is_complete:
            raise ValueError(f"totals.{name} is complete while a root record's {name} is not")


def _check_parameters(layers: Sequence[Any], totals: Any) -> None:
    """``totals.parameters`` = trainable + frozen, and no fewer than the records hold (each
    tensor once: a record's ``shared_parameters`` were shown by an earlier record). Modules
    never called have no record, so the records give a lower bound only."""
    total = totals.parameters
    if not total.is_complete:
        return
    trainable, frozen = totals.trainable_parameters, totals.frozen_parameters
    if (
        trainable.is_complete
        and frozen.is_complete
        and total.value != trainable.value + frozen.value
    ):
        raise ValueError(
            f"totals.parameters: {_shown(total.value)} contradicts trainable_parameters + "
            f"frozen_parameters ({_shown(trainable.value)} + {_shown(frozen.value)})"
        )
    held = sum(max(0, layer.params.parameters - layer.params.shared_parameters) for layer in layers)
    if total.value < held:
        raise ValueError(
            f"totals.parameters: {_shown(total.value)} is fewer than the {held} parameters "
            "the layer records hold"
        )


def _shown(value: Any) -> str:
    """A count in a message: an absurdly long one by its length, not its 400 digits."""
    text = repr(value)
    return text if len(text) <= 30 else f"a {len(text)}-digit number"
