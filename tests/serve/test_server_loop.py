"""The server loop without LoadGen: batching, the handler contract, failures, cleanup.

LoadGen's two callbacks are replaced by recorders; nothing here reads a duration.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

from torchscan_stages.serve.options import ServeOptions
from torchscan_stages.serve.server import ContractError, HandlerError, ServerLoop


@dataclass
class Sample:  # what LoadGen hands IssueQuery: an opaque id and the sample's index
    id: int
    index: int


class Recorder:
    def __init__(self) -> None:
        self.completed: list[tuple[int, int]] = []
        self.first: list[int] = []
        self.all_done = threading.Event()
        self.expected = 0

    def complete(self, done: list[tuple[int, int]]) -> None:
        self.completed += done
        if len(self.completed) >= self.expected:
            self.all_done.set()

    def first_token(self, ident: int) -> None:
        self.first.append(ident)


def _run(handler: Any, options: ServeOptions, count: int, *, streaming: bool = False) -> Any:
    recorder = Recorder()
    recorder.expected = count
    loop = ServerLoop(
        handler,
        list(range(100, 100 + count)),
        options,
        streaming=streaming,
        complete=recorder.complete,
        first_token=recorder.first_token,
    )
    before = threading.active_count()
    loop.start()
    loop.issue([Sample(1000 + i, i) for i in range(count)])
    assert recorder.all_done.wait(10), "every issued request is completed"
    stuck = loop.close()
    assert stuck == [] and threading.active_count() == before  # nothing left running
    return loop, recorder


def test_waiting_requests_are_served_in_batches_up_to_max_batch() -> None:
    seen: list[list[int]] = []

    def batched(samples: list[int]) -> list[int]:
        seen.append(samples)
        return [s * 2 for s in samples]

    # all 6 issued at once: the first batch fills to 4 at once; the 2 left wait out max_wait
    loop, recorder = _run(batched, ServeOptions(max_batch=4, max_wait_s=0.05), 6)
    assert seen == [[100, 101, 102, 103], [104, 105]]
    assert loop.state.batches == [4, 2]
    assert sorted(i for i, _ in recorder.completed) == list(range(1000, 1006))
    assert all(r.served and r.batch in (4, 2) for r in loop.state.records)
    assert loop.state.error is None


def test_a_token_stream_counts_tokens_and_marks_the_first() -> None:
    def stream(sample: int) -> Any:
        return iter(range(sample - 97))  # sample 100 -> 3 tokens, 101 -> 4

    loop, recorder = _run(stream, ServeOptions(), 2, streaming=True)
    assert sorted(recorder.completed) == [(1000, 3), (1001, 4)]
    assert sorted(recorder.first) == [1000, 1001]
    assert all(r.first_token_ns >= r.started_ns for r in loop.state.records)


def test_the_wrong_count_fails_the_run_and_every_request_is_still_completed() -> None:
    loop, recorder = _run(lambda samples: samples[:1], ServeOptions(max_batch=3), 3)
    error = loop.state.error
    assert isinstance(error, ContractError)
    assert "returned 1 response(s) for a batch of 3" in str(error)
    assert len(recorder.completed) == 3


def test_a_raising_handler_is_reported_with_its_sample_and_later_requests_drain() -> None:
    calls: list[int] = []

    def broken(sample: int) -> int:
        calls.append(sample)
        raise KeyError("no such token")

    loop, recorder = _run(broken, ServeOptions(), 5)
    error = loop.state.error
    assert isinstance(error, HandlerError) and isinstance(error.__cause__, KeyError)
    assert str(error) == "the handler raised KeyError: 'no such token' on sample index 0"
    assert calls == [100]  # after the failure the handler is never called again
    assert len(recorder.completed) == 5


def test_a_handler_that_never_returns_is_abandoned_at_the_timeout() -> None:
    def forever(sample: int) -> int:
        while True:  # a Python loop: the watchdog's exception stops it
            time.sleep(0.005)

    loop, recorder = _run(forever, ServeOptions(request_timeout_s=0.1), 2)
    assert isinstance(loop.state.error, TimeoutError)
    assert "request_timeout_s=0.1 s (sample index 0)" in str(loop.state.error)
    assert len(recorder.completed) == 2


def test_nothing_is_completed_after_close() -> None:
    recorder = Recorder()
    loop = ServerLoop(lambda s: s, [1], ServeOptions(), streaming=False, complete=recorder.complete)
    loop.start()
    assert loop.close() == []
    loop.drain()
    loop.issue([Sample(7, 0)])  # LoadGen is gone: nothing may call into it
    assert recorder.completed == []


def test_an_empty_stream_is_a_contract_error() -> None:
    loop, _ = _run(lambda s: iter(()), ServeOptions(), 1, streaming=True)
    assert isinstance(loop.state.error, ContractError)
    with pytest.raises(ContractError, match="ended without yielding a token"):
        raise loop.state.error


def test_workers_serve_requests_at_the_same_time() -> None:
    both = threading.Barrier(2, timeout=5)  # passes only when two calls are in flight at once

    def meet(sample: int) -> int:
        both.wait()
        return sample

    loop, recorder = _run(meet, ServeOptions(workers=2), 2)
    assert loop.state.error is None and len(recorder.completed) == 2
