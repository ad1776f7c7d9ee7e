"""``served_capacity``: the highest offered rate whose latency percentile stays under a bound.

A search over LoadGen ``server`` runs (not LoadGen's FindPeakPerformance mode, which keeps
its intermediate runs to its own log): rates grow by ``growth`` from ``start_qps`` until a
run goes over the bound, then the gap between the last run under it and the first over it
is halved until it is within ``resolution`` (relative) or ``max_runs`` are spent. Every run
is kept as a point of the latency-vs-offered-load curve.

A run is *under* when its percentile is complete and <= the bound, *over* when the
percentile (or its 95% lower bound) is > the bound, and *unsupported* otherwise (too few
requests: each run's duration is sized for enough of them, so this is rare); an unsupported
run counts as not under. The capacity is ``complete`` when the search closed the gap
between an under and an over run; ``partial`` (a lower bound: the highest rate found under)
when no over run was found or the runs ran out first; ``unavailable`` when no run was under.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

import torch

from ..devices import make_synchronize, resolve_device
from ..provenance import build_provenance
from ..report import CapacityPoint, Diagnostic, MetricResult, ServedCapacity, ServedReport
from .handler import handler_name
from .measure import check_inputs, serve_once, served_report, warm_up
from .options import ServeOptions
from .percentiles import needed_requests, percentile_metric

Judgement = Literal["under", "over", "unsupported"]
SCOPE = "served_capacity_at_bound"
METHOD = "loadgen_server_search"


@dataclass(frozen=True)
class CapacitySearch:
    """How the rate is searched: ``start_qps`` (None: half the rate one warm-up call's
    service time allows), ``growth`` (> 1), ``resolution`` (relative gap that ends the
    search), ``max_runs``, ``min_rate_qps`` (the search gives up below it; None: the start
    rate / 64, six halvings: each run lasts long enough for its percentile, so a lower rate
    means a longer run)."""

    start_qps: float | None = None
    growth: float = 2.0
    resolution: float = 0.05
    max_runs: int = 12
    min_rate_qps: float | None = None

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
        runs = self.max_runs
        if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= 200:
            raise ValueError(f"CapacitySearch.max_runs must be an int in [1, 200], got {runs!r}")

    @classmethod
    def from_mapping(cls, search: CapacitySearch | Mapping[str, Any] | None) -> CapacitySearch:
        if search is None:
            return cls()
        if isinstance(search, CapacitySearch):
            return search
        allowed = sorted(f.name for f in fields(cls))
        unknown = sorted(set(search) - set(allowed))
        if unknown:
            raise ValueError(f"capacity search has unknown key(s) {unknown}; allowed: {allowed}")
        return replace(cls(), **dict(search))


@dataclass(frozen=True)
class Probe:
    """One run of the search: its rate, its judgement and its report (None in tests)."""

    qps: float
    judgement: Judgement
    point: CapacityPoint
    report: ServedReport | None = None


def judge(latency: MetricResult, bound_s: float) -> Judgement:
    """under / over / unsupported for one run's percentile (see the module doc)."""
    if latency.status == "complete" and latency.value is not None:
        return "under" if latency.value <= bound_s else "over"
    if latency.known_value is not None and latency.known_value > bound_s:
        return "over"
    return "unsupported"


def search_rates(
    run_at: Callable[[float], Probe], start: float, search: CapacitySearch
) -> list[Probe]:
    """The runs of the search, in order; ``run_at(qps)`` serves one rate (injectable)."""
    probes: list[Probe] = []
    rate = start
    while len(probes) < search.max_runs:
        probe = run_at(rate)
        probes.append(probe)
        below, above = bracket(probes)
        if above is None:
            rate = rate * search.growth  # still under (or nothing under yet): grow
        elif below is None:
            rate = rate / search.growth  # over from the start: come down
            if rate < (search.min_rate_qps or start / 64):
                break
        elif (above.qps - below.qps) / below.qps <= search.resolution:
            break
        else:
            rate = math.sqrt(below.qps * above.qps)  # halve the gap on a log scale
    return probes


def bracket(probes: Sequence[Probe]) -> tuple[Probe | None, Probe | None]:
    """(the highest run under the bound, the lowest run not under it above that one)."""
    under = [p for p in probes if p.judgement == "under"]
    below = max(under, key=lambda p: p.qps) if under else None
    floor = below.qps if below is not None else 0.0
    above_all = [p for p in probes if p.judgement != "under" and p.qps > floor]
    above = min(above_all, key=lambda p: p.qps) if above_all else None
    return below, above


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
    if gap <= search.resolution and above.judgement == "over":
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
        probes = search_rates(_runner(handler, samples, base, device), start, plan)
        diagnostics = []
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
    """One server run at a rate, long enough for its percentile to be complete."""
    needed = needed_requests(base.percentile)

    def run_at(qps: float) -> Probe:
        duration = max(base.duration_s, 1.2 * needed / qps)
        per_run = replace(base, target_qps=qps, duration_s=duration, max_duration_s=None)
        per_run = replace(per_run, min_queries=max(base.min_queries, needed))
        run, settings = serve_once(handler, samples, "server", per_run, device)
        report = served_report(run, handler, samples, "server", settings, device, None)
        assert base.bound_s is not None  # set by _base_options
        return probe_of(report, qps, base.bound_s, base.percentile)

    return run_at


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
    return Probe(qps, judgement, point, report)


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
