"""measure_served on the real LoadGen, in very short runs: structure, LoadGen's own figures,
token streams, bad handlers, and nothing left running afterwards.

No assertion reads a duration: values are compared with LoadGen's own log of the same run
(same samples, same convention), or are counts and statuses.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from signal_defaults import python_sigint

from torchscan_stages import load_report
from torchscan_stages.report import ServedReport, save_report
from torchscan_stages.serve.measure import measure_served
from torchscan_stages.serve.server import ContractError, HandlerError

pytest.importorskip("mlperf_loadgen")

SAMPLES = list(range(8))


def _threads() -> tuple[int, int]:
    """(Python threads, OS threads of this process): LoadGen's native threads count too."""
    return threading.active_count(), len(os.listdir("/proc/self/task"))


def _back_to(before: tuple[int, int]) -> tuple[int, int]:
    """The thread counts once no more than ``before`` (a joined thread's OS thread ends a
    moment after Python saw it end); polls up to 2 s, then returns what it sees."""
    for _ in range(200):
        now = _threads()
        if now[0] <= before[0] and now[1] <= before[1]:
            return before
        time.sleep(0.01)
    return _threads()


@pytest.fixture(scope="module")
def server_run() -> tuple[ServedReport, tuple[int, int], tuple[int, int]]:
    before = _threads()
    report = measure_served(
        lambda sample: sample * 2,
        SAMPLES,
        scenario="server",
        options={"target_qps": 400, "duration_s": 0.25, "bound_s": 0.05},
        name="doubler",
    )
    return report, before, _back_to(before)


def test_a_server_run_reports_loadgens_own_percentiles(server_run: Any) -> None:
    report, before, after = server_run
    assert after == before  # no thread of the loop or of LoadGen outlived the run
    assert report.kind == "served" and report.scenario == "server" and report.name == "doubler"
    log = report.loadgen
    # every request LoadGen counted was matched with the loop's record of it
    assert report.requests == log["result_query_count"] == len(report.latencies_s)
    # the same samples and LoadGen's index floor(n * p): the figures are LoadGen's, exactly
    assert report.latency.p50.known_value == log["result_50.00_percentile_latency_ns"] / 1e9
    assert report.latency.p90.known_value == log["result_90.00_percentile_latency_ns"] / 1e9
    assert report.latency.max.value == log["result_max_latency_ns"] / 1e9
    assert report.latency.p50.scope == "served_request_latency"
    assert report.latency.p50.method == "loadgen_trace"
    assert report.offered_qps.status == report.achieved_qps.status == "complete"
    assert report.validity.verdict in ("VALID", "INVALID")
    assert report.validity.min_duration_met is not None
    assert report.options["target_qps"] == 400 and report.tokens is None
    assert report.execution.calls == {"served": report.requests, "warmup": 2}
    assert report.provenance.host is not None  # host pressure, like every timing report


def test_queueing_plus_service_never_exceeds_latency(server_run: Any) -> None:
    report, _, _ = server_run
    # per request: LoadGen's latency spans its scheduled arrival to the completion call; the
    # loop's queueing + service sit inside that span (stamped after IssueQuery began and
    # before the completion call), up to the two clocks' reading offsets (< 50 us)
    for latency, wait, service, issue in zip(
        report.latencies_s, report.queueing_s, report.service_s, report.issue_delay_s, strict=True
    ):
        assert wait + service <= latency + 50e-6
        assert issue <= wait  # LoadGen's issue delay is the first part of the queueing


def test_the_report_round_trips(server_run: Any, tmp_path: Any) -> None:
    report, _, _ = server_run
    assert load_report(save_report(report, tmp_path / "served.json")) == report


def _stream(sample: int) -> Iterator[int]:
    yield from range(3)


def test_a_token_stream_reports_ttft_tpot_and_token_rates() -> None:
    report = measure_served(
        _stream, SAMPLES, scenario="single_stream", options={"duration_s": 0.05}
    )
    tokens = report.tokens
    assert tokens is not None
    assert tokens.output_tokens == 3 * report.requests  # every request streamed 3 tokens
    assert tokens.ttft.count == tokens.tpot.count == report.requests
    assert tokens.ttft.p50.scope == "served_time_to_first_token"
    assert tokens.tokens_per_s.status == "complete"
    # LoadGen counted the tokens too (its token latencies were on)
    assert report.loadgen["effective_scenario"] == "SingleStream"
    assert "result_first_token_50.00_percentile_latency_ns" in report.loadgen


def test_batches_form_under_the_offline_burst() -> None:
    report = measure_served(
        lambda batch: [s + 1 for s in batch],
        SAMPLES,
        scenario="offline",
        options={"duration_s": 0.02, "max_batch": 4, "target_qps": 200},
    )
    # offline issues every sample at once: full batches of 4 (the last may be smaller)
    assert report.batching.max_batch == 4 and report.batching.batches >= report.requests / 4
    assert report.batching.mean_batch is not None and report.batching.mean_batch > 1


def test_a_bound_below_every_latency_is_an_honest_invalid_run() -> None:
    report = measure_served(
        lambda s: s,
        SAMPLES,
        scenario="server",
        options={"target_qps": 200, "duration_s": 0.1, "bound_s": 1e-9},
    )
    # 1 ns: no request can make it; LoadGen says so and the report keeps every figure
    assert report.validity.verdict == "INVALID"
    assert report.validity.perf_constraints_met is False
    codes = {d.code for d in report.diagnostics}
    assert {"loadgen_invalid", "served_over_bound"} <= codes


def _fails_after_warm_up(error: BaseException) -> Any:
    """Serves sample 0 (the warm-up call's) and raises on any other."""

    def handler(sample: int) -> int:
        if sample != 0:
            raise error
        return sample

    return handler


@pytest.mark.parametrize("scenario", ["server", "single_stream"])
def test_a_handler_that_raises_mid_run_stops_the_run_cleanly(scenario: str) -> None:
    before = _threads()
    with pytest.raises(HandlerError, match=r"raised ValueError: bad input on sample index \d"):
        measure_served(
            _fails_after_warm_up(ValueError("bad input")),
            SAMPLES,
            scenario=scenario,
            options={"target_qps": 200, "duration_s": 0.05},
        )
    assert _back_to(before) == before


def test_a_handler_that_raises_at_once_fails_before_loadgen_starts() -> None:
    message = r"raised ZeroDivisionError: division by zero on its warm-up call \(sample index 0\)"
    with pytest.raises(HandlerError, match=message):
        measure_served(lambda sample: 1 / 0, SAMPLES)


def test_a_handler_that_never_returns_times_out_and_leaves_nothing() -> None:
    def stuck_on_five(sample: int) -> int:
        while sample == 5:
            time.sleep(0.002)  # Python keeps control: the abandoned call can be stopped
        return sample

    before = _threads()
    with pytest.raises(TimeoutError, match=r"request_timeout_s=0.1 s \(sample index 5\)"):
        measure_served(
            stuck_on_five,
            SAMPLES,
            scenario="single_stream",
            options={"duration_s": 0.05, "request_timeout_s": 0.1},
        )
    assert _back_to(before) == before


def test_the_wrong_count_is_refused() -> None:
    with pytest.raises(ContractError, match="returned 2 response"):
        measure_served(lambda batch: [1, 2], SAMPLES, options={"max_batch": 2})


def test_a_keyboard_interrupt_ends_the_run_and_leaves_nothing() -> None:
    sent: list[int] = []

    def interrupting(sample: int) -> int:
        if sample != 0 and not sent:
            sent.append(sample)
            os.kill(os.getpid(), signal.SIGINT)  # as a person's Ctrl-C would, once
        return sample

    before = _threads()
    # Ctrl-C's handler for the test's duration: a suite started in the background inherits
    # SIGINT ignored, and the kill would then do nothing
    with python_sigint(), pytest.raises(KeyboardInterrupt):
        measure_served(interrupting, SAMPLES, scenario="single_stream", options={"duration_s": 0.2})
    assert _back_to(before) == before


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scenario": "server"}, "needs options target_qps"),
        ({"scenario": "server", "options": {"target_qps": float("nan")}}, "target_qps"),
        ({"options": {"duration_s": -1}}, "duration_s"),
        ({"scenario": "burst"}, "scenario must be one of"),
    ],
)
def test_bad_settings_fail_before_anything_runs(kwargs: dict[str, Any], message: str) -> None:
    calls: list[int] = []
    with pytest.raises(ValueError, match=message):
        measure_served(lambda s: calls.append(s), SAMPLES, **kwargs)
    assert calls == []


def test_bad_samples_and_handlers_are_named() -> None:
    with pytest.raises(ValueError, match="samples is empty"):
        measure_served(lambda s: s, [])
    with pytest.raises(TypeError, match="samples must be a sequence"):
        measure_served(lambda s: s, "abc")
    with pytest.raises(TypeError, match="handler must be a callable"):
        measure_served(42, SAMPLES)  # type: ignore[arg-type]


def test_a_handler_that_never_returns_on_its_warm_up_times_out_before_loadgen() -> None:
    def forever(sample: int) -> int:
        while True:  # a Python loop: the abandoned warm-up call can be stopped
            time.sleep(0.002)

    before = _threads()
    with pytest.raises(TimeoutError, match=r"on its warm-up call \(sample index 0\)$"):
        measure_served(forever, SAMPLES, options={"request_timeout_s": 0.05})
    assert _back_to(before) == before


def test_multi_stream_issues_queries_of_its_size() -> None:
    report = measure_served(
        lambda s: s, SAMPLES, scenario="multi_stream",
        options={"duration_s": 0.02, "samples_per_query": 4},
    )  # fmt: skip
    # every query carries 4 samples, each a request of its own
    assert report.requests % 4 == 0 and report.requests == report.loadgen["result_query_count"] * 4
    assert report.offered_qps.status == "unavailable"  # a closed loop offers no rate
