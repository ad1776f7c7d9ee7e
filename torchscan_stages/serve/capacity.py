"""``served_capacity``: the highest offered rate whose latency percentile stays under a bound.

A search over LoadGen ``server`` runs (not LoadGen's FindPeakPerformance mode, which keeps
its intermediate runs to its own log): rates grow by ``growth`` from ``start_qps`` until a
run goes over the bound, then the gap between the last run under it and the first over it
is halved until it is within ``resolution`` (relative) or ``max_runs`` are spent. Every run
is kept as a point of the latency-vs-offered-load curve.

A rate is judged on its requests' percentile and that percentile's distribution-free 95%
interval (serve/percentiles.py): *under* when the whole interval is <= the bound, *over* when
the whole interval is above it, *close* when the bound lies inside it, *unsupported* when too
few requests support the percentile (each run's duration is sized for enough of them, so this
is rare). A close rate is run again and judged on all its runs' requests pooled (a host's
stall that sent a few requests over the bound weighs less in twice the requests), up to
``pool_runs`` runs; then on the pooled percentile itself. The over rate that would close the
search is run once more the same way (one stalled run must not end it). A close or
unsupported rate counts as not under. The capacity is ``complete`` when the search closed the
gap between an under rate and a rate over the bound in two or more runs; ``partial`` (a
lower bound: the highest rate found under) when no rate went over or the runs ran out first;
``unavailable`` when no rate was under. Every run is a point of the curve; a rate's latest
run carries the judgement of all its requests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import torch

from ..devices import make_synchronize, resolve_device
from ..provenance import build_provenance
from ..report import CapacityPoint, Diagnostic, MetricResult, ServedCapacity, ServedReport
from ..settings import settings_from
from .handler import handler_name
from .measure import check_inputs, serve_once, served_report, warm_up
from .options import ServeOptions
from .percentiles import nearest_rank, needed_requests, order_ranks, percentile_metric

Judgement = Literal["under", "over", "close", "unsupported"]
SCOPE = "served_capacity_at_bound"
METHOD = "loadgen_server_search"


@dataclass(frozen=True)
class CapacitySearch:
    """How the rate is searched: ``start_qps`` (None: half the rate one warm-up call's
    service time allows), ``growth`` (> 1), ``resolution`` (relative gap that ends the
    search), ``max_runs``, ``min_rate_qps`` (the search gives up below it; None: the start
    rate / 64, six halvings: each run lasts long enough for its percentile, so a lower rate
    means a longer run), ``pool_runs`` (the most runs at one rate whose requests are pooled
    while the bound lies inside its percentile's interval)."""

    start_qps: float | None = None
    growth: float = 2.0
    resolution: float = 0.05
    max_runs: int = 24
    min_rate_qps: float | None = None
    pool_runs: int = 3

    def __post_init__(self) -> None:
        checks = {
            "growth": (self.growth, 1.0),
            "resolution": (self.resolution, 0.0),
        }
        if self.start_qps is not None:
            checks["start_qps"] = (self.start_qps, 0.0)
        if self.min_rate_qps is not None:
            checks["min_rate_qps"] = (self.min_rate_qps, 0.0)
        for name, (value, floor) in checks.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"CapacitySearch.{name} must be a number, got {value!r}")
            if not math.isfinite(value) or value <= floor or value > 1e6:
                raise ValueError(
                    f"CapacitySearch.{name} must be finite, > {floor:g} and <= 1e6, got {value!r}"
                )
        for name, top in (("max_runs", 200), ("pool_runs", 20)):
            runs = getattr(self, name)
            if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= top:
                raise ValueError(
                    f"CapacitySearch.{name} must be an int in [1, {top}], got {runs!r}"
                )

    @classmethod
    def from_mapping(cls, search: CapacitySearch | Mapping[str, Any] | None) -> CapacitySearch:
        return settings_from(cls, search, what="capacity search")


@dataclass(frozen=True)
class Probe:
    """One run of the search: its rate, its judgement and its report (None in tests)."""

    qps: float
    judgement: Judgement  # of every request served at this rate so far (pooled runs)
    point: CapacityPoint
    report: ServedReport | None = None
    runs: int = 1  # runs at this rate so far, this one included
    latencies: tuple[float, ...] = ()  # this run's request latencies, seconds


def judge(latency: MetricResult, bound_s: float) -> Judgement:
    """under / over / unsupported for a percentile alone (no interval: its value decides)."""
    if latency.status == "complete" and latency.value is not None:
        return "under" if latency.value <= bound_s else "over"
    if latency.known_value is not None and latency.known_value > bound_s:
        return "over"
    return "unsupported"


def judge_requests(
    ordered: Sequence[float], percentile: float, bound_s: float, *, final: bool
) -> Judgement:
    """A rate's judgement from its sorted request latencies (see the module doc); ``final``:
    no run is left for it, so a bound inside the interval is decided by the percentile."""
    n = len(ordered)
    lower, upper = order_ranks(n, percentile) if n else (0, 1)
    if lower >= 1 and ordered[lower - 1] > bound_s:
        return "over"
    if upper > n:
        return "unsupported"
    if ordered[upper - 1] <= bound_s:
        return "under"
    if final:
        return "under" if nearest_rank(ordered, percentile) <= bound_s else "over"
    return "close"


def search_rates(
    run_at: Callable[[float], Probe], start: float, search: CapacitySearch
) -> list[Probe]:
    """The runs of the search, in order; ``run_at(qps)`` serves one rate (injectable)."""
    probes: list[Probe] = []
    rate = start
    while len(probes) < search.max_runs:
        probe = run_at(rate)
        probes.append(probe)
        if probe.judgement == "close" and probe.runs < search.pool_runs:
            continue  # the bound inside the interval: the same rate again, pooled
        below, above = bracket(probes)
        if above is None:
            rate = rate * search.growth  # still under (or nothing under yet): grow
        elif below is None:
            rate = rate / search.growth  # over from the start: come down
            if rate < (search.min_rate_qps or start / 64):
                break
        elif (above.qps - below.qps) / below.qps <= search.resolution:
            if confirmed(probes, above.qps):
                break
            rate = above.qps  # the closing over, once more: was it the host or the rate?
        else:
            rate = math.sqrt(below.qps * above.qps)  # halve the gap on a log scale
    return probes


def bracket(probes: Sequence[Probe]) -> tuple[Probe | None, Probe | None]:
    """(the highest rate under the bound, the lowest rate above it not under), each as its
    latest run, which carries the judgement of all the rate's requests."""
    latest = list({p.qps: p for p in probes}.values())
    under = [p for p in latest if p.judgement == "under"]
    below = max(under, key=lambda p: p.qps) if under else None
    floor = below.qps if below is not None else 0.0
    above_all = [p for p in latest if p.judgement != "under" and p.qps > floor]
    above = min(above_all, key=lambda p: p.qps) if above_all else None
    return below, above


def confirmed(probes: Sequence[Probe], qps: float) -> bool:
    """The rate was run twice or more and all its requests together are over the bound."""
    latest = {p.qps: p for p in probes}.get(qps)
    return latest is not None and latest.runs >= 2 and latest.judgement == "over"


def pooled_rates(probes: Sequence[Probe]) -> list[Diagnostic]:
    """An info naming the rates run more than once (their requests pooled), if any."""
    runs = {p.qps: p.runs for p in probes if p.runs > 1}
    if not runs:
        return []
    listed = ", ".join(f"{qps:.4g} requests/s ({n} runs)" for qps, n in sorted(runs.items()))
    return [
        Diagnostic(
            code="capacity_runs_pooled",
            severity="info",
            metric="served_capacity.capacity_qps",
            count=len(runs),
            message=f"rates run again and judged on all their requests: {listed} (the bound "
            "lay inside the percentile's 95% interval, or the over rate closing the search "
            "was confirmed)",
        )
    ]


def capacity_result(
    probes: Sequence[Probe], search: CapacitySearch
) -> tuple[MetricResult, float | None]:
    """The capacity and the final relative gap (see the module doc for its status)."""
    below, above = bracket(probes)
    kw = {"unit": "requests/s", "scope": SCOPE, "method": METHOD}
    if below is None:
        return MetricResult.unavailable(**kw), None
    if above is None:
        return MetricResult.partial(below.qps, **kw), None
    gap = (above.qps - below.qps) / below.qps
    if gap <= search.resolution and confirmed(probes, above.qps):
        return MetricResult.complete(below.qps, **kw), gap
    return MetricResult.partial(below.qps, **kw), gap


def served_capacity(
    handler: Callable[..., Any],
    samples: Sequence[Any],
    *,
    bound_s: float,
    percentile: float = 99.0,
    options: ServeOptions | Mapping[str, Any] | None = None,
    search: CapacitySearch | Mapping[str, Any] | None = None,
    device: str | torch.device | None = None,
    name: str | None = None,
) -> ServedCapacity:
    """The highest offered ``server`` rate whose ``percentile`` latency is <= ``bound_s``.

    ``options`` set every run (duration, batching, workers, timeout; its bound and
    percentile are these keywords', and target_qps is the search's); ``search`` how the
    rate is searched (:class:`CapacitySearch` or a mapping of its fields).
    """
    check_inputs(handler, samples)
    base = _base_options(options, bound_s, percentile)
    plan = CapacitySearch.from_mapping(search)
    start, call_s = plan.start_qps, None
    if start is None:
        call_s = _one_call_s(handler, samples, base, device)
        start = 0.5 * base.workers * base.max_batch / max(call_s, 1e-4)  # utilisation 0.5
    if call_s is not None and call_s > bound_s:  # no rate can meet it: say so, run nothing
        probes: list[Probe] = []
        diagnostics = [_too_slow(call_s, bound_s)]
    else:
        run_at = pooled(
            _runner(handler, samples, base, device), percentile, bound_s, plan.pool_runs
        )
        probes = search_rates(run_at, start, plan)
        diagnostics = pooled_rates(probes)
    capacity, gap = capacity_result(probes, plan)
    below, above = bracket(probes)
    return ServedCapacity(
        provenance=build_provenance(host=_host(below)),
        name=name,
        handler=handler_name(handler),
        bound_s=bound_s,
        percentile=percentile,
        capacity_qps=capacity,
        curve=[probe.point for probe in probes],
        below=below.report if below else None,
        above=above.report if above else None,
        options={**asdict(base), "search": asdict(plan), "start_qps": start},
        resolution=gap,
        diagnostics=diagnostics,
    )


def _runner(
    handler: Callable[..., Any],
    samples: Sequence[Any],
    base: ServeOptions,
    device: str | torch.device | None,
) -> Callable[[float], Probe]:
    """One server run at a rate, long enough for its percentile to be complete; a rate's
    next run draws its arrivals from the next seed (the same seed replays the same arrival
    times, so a pooled rerun would add no evidence)."""
    needed = needed_requests(base.percentile)
    attempts: dict[float, int] = {}

    def run_at(qps: float) -> Probe:
        duration = max(base.duration_s, 1.2 * needed / qps)
        attempts[qps] = attempts.get(qps, -1) + 1
        seed = (base.seed + attempts[qps]) % 2**63
        per_run = replace(base, target_qps=qps, duration_s=duration, max_duration_s=None)
        per_run = replace(per_run, seed=seed)
        per_run = replace(per_run, min_queries=max(base.min_queries, needed))
        run, settings = serve_once(handler, samples, "server", per_run, device)
        report = served_report(run, handler, samples, "server", settings, device, None)
        assert base.bound_s is not None  # set by _base_options
        return probe_of(report, qps, base.bound_s, base.percentile)

    return run_at


def pooled(
    run_at: Callable[[float], Probe], percentile: float, bound_s: float, pool_runs: int
) -> Callable[[float], Probe]:
    """``run_at`` whose probes are judged on every request served at their rate so far, the
    last allowed run (``pool_runs``) on the pooled percentile itself (see the module doc)."""
    served: dict[float, list[float]] = {}
    runs: dict[float, int] = {}

    def run_pooled(qps: float) -> Probe:
        probe = run_at(qps)
        served.setdefault(qps, []).extend(probe.latencies)
        runs[qps] = runs.get(qps, 0) + 1
        ordered = sorted(served[qps])
        judgement = judge_requests(ordered, percentile, bound_s, final=runs[qps] >= pool_runs)
        return replace(probe, judgement=judgement, runs=runs[qps])

    return run_pooled


def _too_slow(call_s: float, bound_s: float) -> Diagnostic:
    return Diagnostic(
        code="served_slower_than_bound",
        metric="served_capacity.capacity_qps",
        message=f"one handler call took {call_s:.6g} s (the faster of two warm-up calls), "
        f"over bound_s={bound_s:g} s: no offered rate can meet the bound, nothing was run",
    )


def probe_of(report: ServedReport, qps: float, bound_s: float, percentile: float) -> Probe:
    """One search run as a curve point, judged at ``percentile``."""
    latency = percentile_metric(
        sorted(report.latencies_s),
        percentile,
        unit="s",
        scope=report.latency.p50.scope,
        method=report.latency.p50.method,
    )
    judgement = judge(latency, bound_s)
    point = CapacityPoint(
        offered_qps=qps,
        achieved_qps=report.achieved_qps,
        latency_at_percentile=latency,
        p50=report.latency.p50,
        under_bound=None if judgement == "unsupported" else judgement == "under",
        loadgen_verdict=report.validity.verdict,
    )
    return Probe(qps, judgement, point, report, latencies=tuple(report.latencies_s))


def _base_options(
    options: ServeOptions | Mapping[str, Any] | None, bound_s: float, percentile: float
) -> ServeOptions:
    given = ServeOptions.from_mapping(options)
    for field_name in ("bound_s", "percentile", "target_qps"):
        if getattr(given, field_name) != getattr(ServeOptions(), field_name):
            raise ValueError(
                f"served_capacity takes {field_name} as its own keyword or search setting, "
                f"not inside options (got options {field_name}={getattr(given, field_name)!r})"
            )
    return replace(given, bound_s=bound_s, percentile=percentile)


def _one_call_s(
    handler: Callable[..., Any],
    samples: Sequence[Any],
    options: ServeOptions,
    device: str | torch.device | None,
) -> float:
    """The faster of two warm-up calls on the first sample (the search's yardstick)."""
    sync = make_synchronize(resolve_device(device))
    return warm_up(handler, samples[0], options, sync)[1]


def _host(probe: Probe | None) -> Any:
    """The host state of the run at the capacity (the figure's own timing)."""
    return probe.report.provenance.host if probe is not None and probe.report else None
