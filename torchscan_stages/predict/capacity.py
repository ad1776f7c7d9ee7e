"""max_batch_size: the largest batch whose predicted peak fits the owner's memory.

The capacity is always the caller's input, never a default: how much of a device's memory
a job may use (other processes, the CUDA context, NCCL buffers, fragmentation headroom) is
the owner's call. Each probe is one full prediction (``predict_memory``: one device, or one
rank of an FSDP2 or DDP world with ``world_size``), so the search keeps probes few. The
first probe's breakdown at its peak says how many of its bytes grow with the batch
(activations, temporaries, other); the search aims at the batch those bytes extrapolate to
and probes it and its successor, which ends an affine curve (a transformer step's peak is
affine in the batch at a fixed sequence) in three probes. An aim that misses only costs
probes: the search then brackets by doubling or extrapolating the real probes, narrows by
interpolation, falls back to bisection whenever interpolation would not shrink the
bracket, and ends only with two direct predictions side by side: the returned batch fits
and the next one does not. The aim chooses where to probe; it is never reported as a
probe, and every reported peak is a prediction of its own.

Monotonicity is checked, not assumed: if a larger batch ever predicts a smaller peak, the
search stops with a warning ``non_monotonic_peak`` naming both probes and returns no batch
(a search over a non-monotonic curve can step over a fitting region).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..provenance import Provenance, build_provenance
from ..report import Diagnostic, MetricResult, PredictionReport
from .assemble import headline_result
from .entry import predict_memory, resolve_sharding


class BatchProbe(BaseModel):
    """One prediction of the search: the batch, its predicted peak, whether it fits.

    ``peak`` is the figure the prediction's ``fits`` judged (its headline: the steady-state
    peak where a second step needs more than the first), ``resident_bytes`` what the
    workload held before it ran; the verdict is ``peak + resident_bytes <= capacity``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch: int
    peak: MetricResult
    fits: bool | None
    phase_at_peak: str | None = None
    headline: str = "peak"
    resident_bytes: int = 0

    def need(self) -> int | None:
        """Bytes the verdict compares with the capacity (``None``: the peak is unknown)."""
        value = self.peak.known_value
        return None if value is None else int(value) + self.resident_bytes


class BatchSearch(BaseModel):
    """Every probe of a max-batch search, in the order made, and what it concluded.

    ``batch`` is the largest batch predicted to fit (``None``: none fits, or the search could
    not decide; the diagnostics say which). ``curve`` is the predicted peak per batch probed,
    sorted by batch. All peaks are predictions (``fake_tensor_prediction``), never
    measurements.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = "batch_search"
    provenance: Provenance
    name: str | None = None
    device: str
    world_size: int | None = None
    sharding: str | None = None  # "fsdp2" or "ddp" with world_size; None: one device
    capacity_bytes: int
    batch: int | None
    probes: list[BatchProbe]
    curve: dict[int, MetricResult] = Field(default_factory=dict)
    diagnostics: list[Diagnostic] = Field(default_factory=list)


# the categories of a peak breakdown whose bytes grow with the batch (the rest: weights,
# their gradients, optimizer state and FSDP2's gathered copies and comm buffers do not)
BATCH_CATEGORIES = ("activations", "temporaries", "other")


def _check_int(value: Any, name: str, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


class _Search:
    """The probes made so far and the predictor they go through."""

    def __init__(self, predict: Callable[[int], PredictionReport], capacity: int) -> None:
        self.predict = predict
        self.capacity = capacity
        self.probes: list[BatchProbe] = []
        self.by_batch: dict[int, BatchProbe] = {}
        self.diagnostics: list[Diagnostic] = []
        self.growing: dict[int, int] = {}  # batch -> bytes at its peak that grow with it

    def probe(self, batch: int) -> BatchProbe:
        if batch in self.by_batch:
            return self.by_batch[batch]
        report = self.predict(batch)
        judged = headline_result(report)
        resident = report.resident_bytes.known_value if report.resident_bytes else None
        probe = BatchProbe(
            batch=batch,
            peak=judged,
            fits=report.fits,
            phase_at_peak=report.phase_at_peak,
            headline=report.headline,
            resident_bytes=int(resident or 0),
        )
        self.probes.append(probe)
        self.by_batch[batch] = probe
        parts = [report.by_category.get(name) for name in BATCH_CATEGORIES]
        values = [int(p.known_value) for p in parts if p is not None and p.known_value is not None]
        if len(values) == len(parts):
            self.growing[batch] = sum(values)
        return probe

    def aim(self, start: int, limit: int) -> int | None:
        """The batch the first probe's batch-growing bytes extrapolate to (``None``: they
        are unknown or zero); only where to probe next, never a result."""
        first = self.by_batch[start].need()
        growing = self.growing.get(start, 0)
        if first is None or growing <= 0 or limit <= start:
            return None
        # rounded, not floored: on an exactly affine curve the growing bytes can exceed the
        # slope by a few bytes (a batch-independent scalar), and a floor would aim one short
        guess = start + round((self.capacity - first) * start / growing)
        return min(max(guess, start + 1), limit)

    def monotonic(self) -> bool:
        """Known peaks never fall as the batch grows; a warning names the first fall."""
        ordered = sorted(
            (p for p in self.probes if p.peak.known_value is not None), key=lambda p: p.batch
        )
        for smaller, larger in itertools.pairwise(ordered):
            assert smaller.peak.known_value is not None and larger.peak.known_value is not None
            if larger.peak.known_value < smaller.peak.known_value:
                self.diagnostics.append(
                    Diagnostic(
                        code="non_monotonic_peak",
                        metric="batch",
                        message=f"batch {larger.batch} predicts {larger.peak.known_value:,} "
                        f"bytes, less than batch {smaller.batch}'s "
                        f"{smaller.peak.known_value:,}: the peak is not monotonic in the "
                        "batch, so no search can promise the largest fitting batch",
                    )
                )
                return False
        return True

    def undecided(self, probe: BatchProbe) -> bool:
        if probe.fits is not None:
            return False
        self.diagnostics.append(
            Diagnostic(
                code="fit_undecided",
                metric="batch",
                message=f"batch {probe.batch}: the prediction is a lower bound "
                f"({probe.peak.known_value} bytes, status {probe.peak.status}) below the "
                "capacity, so whether it fits is unknown; see that prediction's diagnostics",
            )
        )
        return True

    def next_inside(self, low: int, high: int) -> int:
        """The next batch strictly between a fitting ``low`` and a failing ``high``:
        interpolated on the two peaks, clamped inside, bisection if that cannot shrink."""
        a, b = self.by_batch[low].need(), self.by_batch[high].need()
        middle = (low + high) // 2
        if a is None or b is None or b <= a:
            return middle
        guess = low + int((self.capacity - a) * (high - low) / (b - a))
        return min(max(guess, low + 1), high - 1)


def max_batch_size(
    step_factory: Callable[[int], Callable[..., Any]],
    *,
    capacity_bytes: int,
    device: str = "cuda",
    world_size: int | None = None,
    sharding: str | None = None,
    start: int = 1,
    limit: int = 1 << 20,
    name: str | None = None,
) -> BatchSearch:
    """The largest batch in ``[start, limit]`` whose predicted peak fits ``capacity_bytes``.

    ``step_factory(batch)`` returns the workload of :func:`predict_peak_memory` (a
    zero-argument step) or, with ``world_size``, the ``step(mesh)`` of
    :func:`predict_sharded_peak_memory` (one rank of an FSDP2 world; ``sharding="fsdp2"``,
    the default with ``world_size``), or with ``sharding="ddp"`` the ``step(wrap)`` of
    :func:`predict_ddp_peak_memory`. Every verdict is ``resident_bytes`` + the headline
    peak (the steady state of a training step) against the capacity.
    ``capacity_bytes`` is the owner's usable memory per device, in bytes; there is no default.
    """
    capacity = _check_int(capacity_bytes, "capacity_bytes", 1)
    _check_int(start, "start", 1)
    _check_int(limit, "limit", start)
    if not callable(step_factory):
        raise TypeError(f"step_factory must be a callable taking the batch, got {step_factory!r}")
    sharding = resolve_sharding(sharding, world_size, "max_batch_size")

    def predict(batch: int) -> PredictionReport:
        return predict_memory(
            step_factory(batch),
            sharding=sharding,
            world_size=world_size,
            device=device,
            capacity_bytes=capacity,
        )

    search = _Search(predict, capacity)
    batch = _bracket_and_narrow(search, start, limit)
    if not search.monotonic():
        batch = None
    curve = {p.batch: p.peak for p in sorted(search.probes, key=lambda p: p.batch)}
    if any(p.headline == "steady_state_peak" for p in search.probes):
        search.diagnostics.append(_judged_on_steady_state())
    return BatchSearch(
        provenance=build_provenance(),
        name=name,
        device=device,
        world_size=world_size,
        sharding=sharding,
        capacity_bytes=capacity,
        batch=batch,
        probes=search.probes,
        curve=curve,
        diagnostics=search.diagnostics,
    )


def _bracket_and_narrow(search: _Search, start: int, limit: int) -> int | None:
    """Doubling until a batch fails (or ``limit`` fits), then narrowing to the pair
    ``(b fits, b + 1 does not)``; ``None`` when nothing fits or a probe cannot decide."""
    first = search.probe(start)
    if search.undecided(first):
        return None
    if not first.fits:
        search.diagnostics.append(
            Diagnostic(
                code="nothing_fits",
                severity="info",
                metric="batch",
                message=f"the smallest batch searched ({start}) predicts "
                f"{first.peak.known_value:,} bytes, over the capacity of {search.capacity:,}",
            )
        )
        return None
    low, high = start, None
    candidate = start
    aimed = search.aim(start, limit)
    if aimed is not None:
        found = _probe_pair(search, aimed, limit)
        if found is None:
            return None
        low, high = max(low, found[0]), found[1]
        candidate = low
        if high is None and low == limit:
            search.diagnostics.append(_limit_fits(limit))
            return limit
    while high is None:
        candidate = min(_grow(search, low, candidate), limit)
        probe = search.probe(candidate)
        if search.undecided(probe) or not search.monotonic():
            return None
        if probe.fits:
            low = candidate
            if candidate == limit:
                search.diagnostics.append(_limit_fits(limit))
                return limit
        else:
            high = candidate
    while high - low > 1:
        candidate = search.next_inside(low, high)
        probe = search.probe(candidate)
        if search.undecided(probe) or not search.monotonic():
            return None
        if probe.fits:
            low = candidate
        else:
            high = candidate
        if high - low > 1:  # a guess lands near the answer: probe its neighbour next
            side = low + 1 if probe.fits else high - 1
            neighbour = search.probe(side)
            if search.undecided(neighbour) or not search.monotonic():
                return None
            low, high = (side, high) if neighbour.fits else (low, side)
    return low


def _judged_on_steady_state() -> Diagnostic:
    return Diagnostic(
        code="judged_on_steady_state",
        severity="info",
        metric="batch",
        message="each verdict is resident_bytes + the steady-state peak (a second training "
        "step, with the optimizer state and what else the first step leaves alive), the "
        "figure every step after the first needs; the first step's peak is lower",
    )


def _limit_fits(limit: int) -> Diagnostic:
    return Diagnostic(
        code="limit_fits",
        severity="info",
        metric="batch",
        message=f"the search limit, batch {limit}, still fits; larger batches were not probed",
    )


def _probe_pair(search: _Search, aimed: int, limit: int) -> tuple[int, int | None] | None:
    """Probe the aimed batch, then the neighbour that would settle it (its successor if it
    fits, its predecessor if not) when the line through the first probe and the aimed one
    agrees the answer is there: ``(largest fitting, smallest failing or None)`` known after,
    or ``None`` when a probe cannot decide or the curve falls."""
    probe = search.probe(aimed)
    if search.undecided(probe) or not search.monotonic():
        return None
    fitting = max(b for b, p in search.by_batch.items() if p.fits and b <= aimed)
    if probe.fits:
        if aimed == limit or _line_answer(search, aimed) != aimed:
            return aimed, None  # the aim fell short: the bracketing extrapolates from here
        successor = search.probe(aimed + 1)
        if search.undecided(successor) or not search.monotonic():
            return None
        return (aimed + 1, None) if successor.fits else (aimed, aimed + 1)
    if aimed - 1 > fitting and _line_answer(search, aimed) == aimed - 1:
        predecessor = search.probe(aimed - 1)
        if search.undecided(predecessor) or not search.monotonic():
            return None
        return (aimed - 1, aimed) if predecessor.fits else (fitting, aimed - 1)
    return fitting, aimed


def _line_answer(search: _Search, batch: int) -> int | None:
    """The largest batch the line through the smallest probe and ``batch``'s says fits."""
    first = min(search.by_batch)
    a, b = search.by_batch[first].need(), search.by_batch[batch].need()
    if a is None or b is None or b <= a or batch == first:
        return None
    return first + int((search.capacity - a) * (batch - first) / (b - a))


def _grow(search: _Search, low: int, last: int) -> int:
    """The next batch while bracketing: doubling until two peaks are known, then one past
    the answer they extrapolate to (growing by at least half, so a sub-affine curve is
    still bracketed in few probes)."""
    known = sorted((p for p in search.probes if p.need() is not None), key=lambda p: p.batch)
    doubled = max(last * 2, last + 1)
    if len(known) < 2:
        return doubled
    a, b = known[-2].need(), known[-1].need()
    assert a is not None and b is not None
    slope = (b - a) / max(known[-1].batch - known[-2].batch, 1)
    if slope <= 0:
        return doubled
    # one past the extrapolated answer, so the probe is expected to fail and bracket it
    guess = known[-1].batch + int((search.capacity - b) / slope) + 1
    return max(guess, last + max(1, last // 2)) if guess > last else doubled
