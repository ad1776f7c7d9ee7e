"""``measure_served``: a request handler driven by MLPerf LoadGen, per-request figures out.

LoadGen generates the load (its scenarios, Poisson arrivals, validity rules); the package's
server loop serves it (batching, timeouts, token streams) and keeps the scopes. Two warm-up
calls on the first sample run before the test (they tell a streaming handler apart and give
LoadGen its expected latency); they are not among the served requests. Everything started here
(LoadGen's objects and threads, the loop's threads) is gone when this returns or raises,
except a handler call blocked inside C code, which no Python thread can stop (the error says
so and names the thread).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..devices import execution_record, make_synchronize, resolve_device
from ..measure.host import HostMonitor, host_diagnostics
from ..provenance import build_provenance
from ..report import Diagnostic, HostState, ServedBatching, ServedReport
from .figures import (
    ISSUE,
    LATENCY,
    QUEUEING,
    SERVICE,
    Matched,
    achieved_qps,
    distribution,
    match,
    offered_qps,
    token_figures,
)
from .handler import handler_name, is_token_stream
from .loadgen_log import loadgen_results, validity
from .loadgen_run import LoadgenOutput, completions, loadgen_module, run_test
from .options import ServeOptions, check_scenario
from .scenarios import loadgen_fields
from .server import (
    Abandoned,
    ContractError,
    HandlerError,
    LoopState,
    ServerLoop,
    check_responses,
    handler_error,
    raise_in_thread,
)

STUCK_GRACE_S = 2.0
WARMUP_CALLS = 2  # before the test, on the first sample; never among the served requests


@dataclass(frozen=True)
class ServedRun:
    """What one LoadGen test left: the loop's records, LoadGen's logs, the host around it."""

    state: LoopState
    output: LoadgenOutput
    host: HostState | None  # None: injected runs (tests), no host was measured
    streaming: bool
    warmup_s: float


def measure_served(
    handler: Callable[..., Any],
    samples: Sequence[Any],
    *,
    scenario: str = "single_stream",
    options: ServeOptions | Mapping[str, Any] | None = None,
    device: str | torch.device | None = None,
    name: str | None = None,
) -> ServedReport:
    """Serve ``samples`` to ``handler`` under LoadGen's ``scenario`` and report per request.

    ``handler(sample)`` returns a response, or an iterator of tokens (a token stream); with
    ``max_batch > 1`` it takes a list and returns a list. ``samples`` is LoadGen's sample
    library (a sequence, all in memory). ``options``: a :class:`ServeOptions` or a mapping of
    its fields. ``device``: where the handler's work runs, synchronised after each call.
    A handler that raises, times out or returns the wrong count ends the run with that error.
    """
    run, settings = serve_once(handler, samples, scenario, options, device)
    return served_report(run, handler, samples, scenario, settings, device, name)


def serve_once(
    handler: Callable[..., Any],
    samples: Sequence[Any],
    scenario: str,
    options: ServeOptions | Mapping[str, Any] | None,
    device: str | torch.device | None,
) -> tuple[ServedRun, ServeOptions]:
    """One validated LoadGen test (the shared core of measure_served and served_capacity)."""
    check_scenario(scenario)
    settings = ServeOptions.from_mapping(options)
    check_inputs(handler, samples)
    if scenario == "server" and settings.target_qps is None:
        raise ValueError("scenario 'server' needs options target_qps (the offered rate, > 0)")
    sync = make_synchronize(resolve_device(device))
    lg = loadgen_module()
    streaming, warmup_s = warm_up(handler, samples[0], settings, sync)
    fields = loadgen_fields(scenario, settings, tokens=streaming, expected_latency_s=warmup_s)
    complete, first_token = completions(lg)
    loop = ServerLoop(
        _synced(handler, sync),
        samples,
        settings,
        streaming=streaming,
        complete=complete,
        first_token=first_token if streaming else None,
    )
    monitor = HostMonitor()
    try:
        output = run_test(loop, fields, len(samples))
    finally:
        stuck = loop.close(STUCK_GRACE_S)
        host = monitor.finish()
    _raise_failure(loop.state, stuck)
    return ServedRun(loop.state, output, host, streaming, warmup_s), settings


def check_inputs(handler: object, samples: object) -> None:
    if not callable(handler):
        raise TypeError(
            f"handler must be a callable taking one sample, got {type(handler).__name__}"
        )
    if isinstance(samples, (str, bytes)) or not isinstance(samples, Sequence):
        raise TypeError(
            f"samples must be a sequence of samples (a list), got {type(samples).__name__}"
        )
    if len(samples) == 0:
        raise ValueError("samples is empty: LoadGen needs at least one sample to issue")


def _synced(handler: Callable[..., Any], sync: Callable[[], None]) -> Callable[..., Any]:
    def call(argument: Any) -> Any:
        response = handler(argument)
        sync()
        return response

    return call


def _warm_call(handler: Callable[..., Any], sample: Any, options: ServeOptions) -> bool:
    """One warm-up call; whether it streamed (its stream consumed)."""
    response = handler([sample] if options.max_batch > 1 else sample)
    if options.max_batch > 1:
        response = check_responses(response, 1, "the warm-up call, sample index 0")[0]
    streaming = is_token_stream(response)
    if streaming and options.max_batch > 1:
        raise ContractError("token streams are served one request at a time: max_batch=1")
    if streaming and sum(1 for _ in response) == 0:
        raise ContractError(
            "the handler's token stream ended without yielding a token (warm-up call, "
            "sample index 0)"
        )
    return streaming


def warm_up(
    handler: Callable[..., Any], sample: Any, options: ServeOptions, sync: Callable[[], None]
) -> tuple[bool, float]:
    """(streams tokens, fastest seconds) of WARMUP_CALLS calls on ``sample``, under the
    request timeout each."""
    found: dict[str, Any] = {}

    def call() -> None:
        try:
            times = []
            for _ in range(WARMUP_CALLS):  # the first is cold; LoadGen gets the fastest
                start = time.perf_counter()
                streaming = _warm_call(handler, sample, options)
                sync()
                times.append(time.perf_counter() - start)
            found["result"] = (streaming, min(times))
        except Abandoned:
            return
        except BaseException as error:
            found["error"] = handler_error(error, "its warm-up call (sample index 0)")

    done = threading.Event()  # not Thread.join: interrupted, it marks a running thread stopped

    def guarded() -> None:
        try:
            call()
        finally:
            done.set()

    thread = threading.Thread(target=guarded, name="serve-warmup", daemon=True)
    thread.start()
    try:
        finished = done.wait(options.request_timeout_s * WARMUP_CALLS)
    except BaseException:  # KeyboardInterrupt: stop the call (if Python can), then go on
        raise_in_thread(thread.ident or 0, Abandoned)
        done.wait(STUCK_GRACE_S)
        raise
    if not finished:
        raise_in_thread(thread.ident or 0, Abandoned)
        done.wait(STUCK_GRACE_S)
        raise TimeoutError(
            f"the handler did not return within request_timeout_s={options.request_timeout_s:g} s "
            "on its warm-up call (sample index 0)" + _stuck_note([thread.name], not done.is_set())
        )
    thread.join()
    if "error" in found:
        raise found["error"]
    streaming, seconds = found["result"]
    return bool(streaming), float(seconds)


def _stuck_note(names: list[str], alive: bool) -> str:
    if not alive:
        return ""
    return (
        f"; thread(s) {names} are still blocked inside the handler (a call blocked in C code "
        "cannot be stopped from Python) and end when the call returns"
    )


def _raise_failure(state: LoopState, stuck: list[str]) -> None:
    if state.error is not None:
        if stuck and isinstance(state.error, (HandlerError, ContractError, TimeoutError)):
            raise type(state.error)(str(state.error) + _stuck_note(stuck, True)) from (
                state.error.__cause__
            )
        raise state.error
    if stuck:
        raise RuntimeError(f"measure_served: server thread(s) {stuck} did not stop")


def served_report(
    run: ServedRun,
    handler: object,
    samples: Sequence[Any],
    scenario: str,
    options: ServeOptions,
    device: str | torch.device | None,
    name: str | None,
) -> ServedReport:
    """The report of one served run (the figures of :mod:`.figures`)."""
    matched = match(run.state.records, run.output.trace)
    diagnostics = list(matched.diagnostics) + _run_diagnostics(run, matched, options)
    batches = run.state.batches
    return ServedReport(
        provenance=build_provenance(host=run.host),
        name=name,
        handler=handler_name(handler),
        scenario=scenario,  # type: ignore[arg-type]
        options=options.settings(),
        execution=execution_record(
            resolve_device(device), {"served": len(matched.records), "warmup": WARMUP_CALLS}
        ),
        samples=len(samples),
        requests=len(matched.records),
        warmup_calls=WARMUP_CALLS,
        latency=distribution(matched.latency_s, unit="s", scope=LATENCY[0], method=LATENCY[1]),
        queueing=distribution(matched.queueing_s, unit="s", scope=QUEUEING[0], method=QUEUEING[1]),
        service=distribution(matched.service_s, unit="s", scope=SERVICE[0], method=SERVICE[1]),
        loadgen_issue_delay=distribution(
            matched.issue_delay_s, unit="s", scope=ISSUE[0], method=ISSUE[1]
        ),
        offered_qps=offered_qps(scenario, matched.samples),
        achieved_qps=achieved_qps(matched.samples),
        validity=validity(run.output.detail),
        batching=ServedBatching(
            max_batch=options.max_batch,
            max_wait_s=options.max_wait_s,
            batches=len(batches),
            mean_batch=sum(batches) / len(batches) if batches else None,
        ),
        tokens=token_figures(matched) if run.streaming else None,
        latencies_s=matched.latency_s,
        queueing_s=matched.queueing_s,
        service_s=matched.service_s,
        issue_delay_s=matched.issue_delay_s,
        arrivals_s=_arrivals(matched),
        loadgen=loadgen_results(run.output.detail.values),
        loadgen_version=run.output.version,
        diagnostics=diagnostics,
    )


def _arrivals(matched: Matched) -> list[float]:
    if not matched.samples:
        return []
    first = min(sample.scheduled_ns for sample in matched.samples)
    return [(sample.scheduled_ns - first) / 1e9 for sample in matched.samples]


def _run_diagnostics(run: ServedRun, matched: Matched, options: ServeOptions) -> list[Diagnostic]:
    found = host_diagnostics(run.host, None, "served.latency") if run.host is not None else []
    if run.output.trace_error:
        found.append(
            Diagnostic(
                code="served_trace_unreadable",
                metric="served.latency",
                message=run.output.trace_error,
            )
        )
    verdict = validity(run.output.detail)
    if verdict.verdict == "INVALID":
        why = " ".join(verdict.reasons) or "see validity"
        found.append(
            Diagnostic(
                code="loadgen_invalid",
                metric="served.validity",
                message=f"LoadGen judged the run INVALID: {why}",
            )
        )
    bound = options.bound_s
    p = matched.latency_s and sorted(matched.latency_s)
    if bound is not None and p:
        over = sum(1 for value in p if value > bound)
        if over:
            found.append(
                Diagnostic(
                    code="served_over_bound",
                    severity="info",
                    metric="served.latency",
                    message=f"{over} of {len(p)} request(s) took longer than bound_s={bound:g} s",
                    count=over,
                )
            )
    return found
