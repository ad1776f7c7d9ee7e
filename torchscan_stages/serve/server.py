"""The package's server loop: LoadGen issues requests, these threads serve them.

LoadGen's issue thread calls :meth:`ServerLoop.issue`, which only stamps and queues each
request; worker threads gather batches (up to ``max_batch``, waiting at most ``max_wait_s``
after the oldest request arrived), call the handler and report completions back. A watchdog
abandons a call that runs past ``request_timeout_s``. Once the run has failed (the handler
raised, timed out, returned the wrong count) or was stopped, every request issued so far or
later is completed at once without calling the handler, so LoadGen always finishes: its
test only returns when every issued sample is complete. Completions are guarded (each
sample once, never after :meth:`close`), because LoadGen's objects are freed after the run.
"""

from __future__ import annotations

import collections
import ctypes
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .handler import is_token_stream
from .options import ServeOptions

Clock = Callable[[], int]  # nanoseconds
Complete = Callable[[list[tuple[int, int]]], None]  # [(LoadGen sample id, n_tokens)]
FirstToken = Callable[[int], None]  # LoadGen sample id


class Abandoned(BaseException):
    """Raised inside a worker whose handler call ran past its timeout."""


@dataclass(slots=True)
class RequestRecord:
    """One served request on the loop's clock (ns); -1 where it did not happen."""

    ordinal: int  # issue order: LoadGen's sample sequence number
    index: int  # the sample's index in the caller's samples
    issued_ns: int
    started_ns: int = -1
    first_token_ns: int = -1
    done_ns: int = -1
    tokens: int = 0
    batch: int = 0
    served: bool = False  # the handler produced its response (not drained after a failure)


@dataclass(slots=True)
class _Pending:
    ident: int
    record: RequestRecord


@dataclass
class LoopState:
    """What the loop saw: every request, the first failure and the batch sizes."""

    records: list[RequestRecord] = field(default_factory=list)
    error: BaseException | None = None
    batches: list[int] = field(default_factory=list)


class ServerLoop:
    """Serves LoadGen's requests with ``handler`` on worker threads (see the module doc)."""

    def __init__(
        self,
        handler: Callable[..., Any],
        samples: Sequence[Any],
        options: ServeOptions,
        *,
        streaming: bool,
        complete: Complete,
        first_token: FirstToken | None = None,
        clock: Clock = time.perf_counter_ns,
    ) -> None:
        self._handler = handler
        self._samples = samples
        self._options = options
        self._streaming = streaming
        self._complete_fn = complete
        self._first_token_fn = first_token
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: collections.deque[_Pending] = collections.deque()
        self._outstanding: dict[int, RequestRecord] = {}
        self._lock = threading.Lock()  # completions and the outstanding table
        self._inflight: dict[int, tuple[float, list[_Pending]]] = {}
        self._stopping = False
        self._draining = False
        self._closed = False
        self.state = LoopState()
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ LoadGen's side

    def issue(self, query_samples: Sequence[Any]) -> None:
        """LoadGen's IssueQuery: stamp and queue (or complete at once when draining)."""
        now = self._clock()
        pending = []
        with self._lock:
            for sample in query_samples:
                record = RequestRecord(len(self.state.records), int(sample.index), now)
                self.state.records.append(record)
                self._outstanding[int(sample.id)] = record
                pending.append(_Pending(int(sample.id), record))
        if self._draining:
            self._complete(pending, drained=True)
            return
        with self._cond:
            self._queue.extend(pending)
            self._cond.notify_all()

    def flush(self) -> None:
        """LoadGen's FlushQueries: nothing is held back, so nothing to flush."""

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        for number in range(self._options.workers):
            self._spawn(self._work, f"serve-worker-{number}")
        self._spawn(self._watch, "serve-watchdog")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def fail(self, error: BaseException) -> None:
        """Record the first failure and complete every outstanding request from now on."""
        with self._lock:
            if self.state.error is None:
                self.state.error = error
        self.drain()

    def drain(self) -> None:
        """Stop calling the handler: complete everything issued, now and later."""
        self._draining = True
        with self._cond:
            waiting = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        self._complete(waiting, drained=True)
        self.sweep()

    def sweep(self) -> None:
        """Complete every issued request not yet completed (once draining)."""
        if not self._draining:
            return
        with self._lock:
            left = [_Pending(ident, record) for ident, record in self._outstanding.items()]
        self._complete(left, drained=True)

    def close(self, grace_s: float = 2.0) -> list[str]:
        """Stop the threads; names of any still alive after ``grace_s`` (stuck handlers)."""
        with self._lock:
            self._closed = True
        self._stopping = True
        with self._cond:
            self._cond.notify_all()
        deadline = time.monotonic() + grace_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [thread.name for thread in self._threads if thread.is_alive()]

    # ------------------------------------------------------------------ completions

    def _complete(self, batch: list[_Pending], *, drained: bool = False) -> None:
        with self._lock:
            if self._closed:
                return
            done = []
            for item in batch:
                if self._outstanding.pop(item.ident, None) is None:
                    continue  # completed already (by the watchdog or a sweep)
                if drained and item.record.done_ns < 0:
                    item.record.done_ns = self._clock()
                done.append((item.ident, item.record.tokens))
            if done:
                self._complete_fn(done)

    def _first_token(self, item: _Pending) -> None:
        if self._first_token_fn is None:
            return
        with self._lock:
            if not self._closed and item.ident in self._outstanding:
                self._first_token_fn(item.ident)

    # ------------------------------------------------------------------ workers

    def _take(self) -> list[_Pending]:
        options = self._options
        with self._cond:
            while not self._queue and not self._stopping:
                self._cond.wait()
            if not self._queue:
                return []
            batch = [self._queue.popleft()]
            deadline = batch[0].record.issued_ns + options.max_wait_s * 1e9
            while len(batch) < options.max_batch:
                if self._queue:
                    batch.append(self._queue.popleft())
                    continue
                remaining = (deadline - self._clock()) / 1e9
                if remaining <= 0 or self._stopping or self._draining:
                    break
                self._cond.wait(remaining)
            return batch

    def _work(self) -> None:
        me = threading.get_ident()
        while True:
            try:
                batch = self._take()
                if not batch:
                    return
                if self._draining:
                    self._complete(batch, drained=True)
                    continue
                self.state.batches.append(len(batch))
                self._serve(me, batch)
            except Abandoned:
                continue  # the watchdog completed the batch and recorded the timeout
            finally:
                with self._lock:
                    self._inflight.pop(me, None)

    def _serve(self, me: int, batch: list[_Pending]) -> None:
        start = self._clock()
        for item in batch:
            item.record.started_ns = start
            item.record.batch = len(batch)
        with self._lock:
            self._inflight[me] = (time.monotonic(), batch)
        try:
            responses = self._call(batch)
            if self._streaming:
                self._stream(batch[0], responses[0])
        except Abandoned:
            raise
        except BaseException as error:  # the handler's own failure, reported to the caller
            self.fail(handler_error(error, _where(batch)))
            return
        end = self._clock()
        with self._lock:
            self._inflight.pop(me, None)
        for item in batch:
            if item.record.done_ns < 0:
                item.record.done_ns = end
            item.record.served = True
        self._complete(batch)

    def _call(self, batch: list[_Pending]) -> Sequence[Any]:
        if self._options.max_batch == 1:
            return [self._handler(self._samples[batch[0].record.index])]
        responses = self._handler([self._samples[item.record.index] for item in batch])
        return check_responses(responses, len(batch), _where(batch))

    def _stream(self, item: _Pending, response: Any) -> None:
        if not is_token_stream(response):
            raise ContractError(
                "the handler streamed tokens on its warm-up call but returned "
                f"{type(response).__name__} on sample index {item.record.index}; a handler "
                "either always streams or never"
            )
        for _ in response:
            if item.record.tokens == 0:
                item.record.first_token_ns = self._clock()
                self._first_token(item)
            item.record.tokens += 1
        item.record.done_ns = self._clock()
        if item.record.tokens == 0:
            raise ContractError(
                f"the handler's token stream for sample index {item.record.index} ended "
                "without yielding a token"
            )

    # ------------------------------------------------------------------ watchdog

    def _watch(self) -> None:
        timeout = self._options.request_timeout_s
        poll = min(0.05, timeout / 4)
        while not self._stopping:
            time.sleep(poll)
            now = time.monotonic()
            with self._lock:
                late = [(t, b) for t, (s, b) in self._inflight.items() if now - s > timeout]
                for thread_id, _ in late:
                    del self._inflight[thread_id]
            for thread_id, batch in late:
                index = batch[0].record.index
                self.fail(
                    TimeoutError(
                        f"the handler did not return within request_timeout_s={timeout:g} s "
                        f"(sample index {index}); the call was abandoned"
                    )
                )
                raise_in_thread(thread_id, Abandoned)
            self.sweep()


class HandlerError(RuntimeError):
    """The handler raised while serving; its own exception is ``__cause__``."""


def check_responses(responses: object, size: int, where: str) -> Sequence[Any]:
    """A batched handler's responses: a list with one response per sample, or a refusal."""
    if isinstance(responses, (str, bytes)) or not isinstance(responses, Sequence):
        raise ContractError(
            f"a batched handler must return a list of responses, got "
            f"{type(responses).__name__} for {where}"
        )
    if len(responses) != size:
        raise ContractError(
            f"the handler returned {len(responses)} response(s) for a batch of {size} "
            f"sample(s) ({where}); a batched handler returns one per sample"
        )
    return responses


def _where(batch: list[_Pending]) -> str:
    indices = [item.record.index for item in batch]
    return f"sample index {indices[0]}" if len(indices) == 1 else f"sample indices {indices}"


def handler_error(error: BaseException, where: str) -> BaseException:
    """A handler's exception as one line naming the sample; the package's own refusals
    (wrong count, an empty stream, a timeout) and non-Exceptions pass unchanged."""
    if not isinstance(error, Exception) or isinstance(error, ContractError):
        return error
    wrapped = HandlerError(f"the handler raised {type(error).__name__}: {error} on {where}")
    wrapped.__cause__ = error
    return wrapped


class ContractError(ValueError):
    """A response that breaks the handler contract (wrong count, type, empty stream)."""


def raise_in_thread(thread_id: int, exception: type[BaseException]) -> bool:
    """Raise ``exception`` in another thread at its next Python instruction (CPython).

    Stops a handler looping in Python; one blocked inside a C call (a sleep, a lock) sees
    it only when that call returns. True when the thread was found.
    """
    found = ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exception)
    )
    return bool(found == 1)
