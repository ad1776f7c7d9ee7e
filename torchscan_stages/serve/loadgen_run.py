"""One LoadGen performance test around a :class:`ServerLoop`, and nothing left behind.

LoadGen's objects (SUT, QSL) are built, the test runs on a helper thread (so the caller's
thread stays in Python and a KeyboardInterrupt arrives at once: the loop then drains, LoadGen
ends at its own pace) and the objects are destroyed in ``finally``. LoadGen joins its own
threads before its test returns. Its logs go to a temporary folder, read, then removed.
"""

from __future__ import annotations

import importlib
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .loadgen_log import DetailLog, TraceSample, parse_detail, parse_trace
from .server import Complete, FirstToken, ServerLoop

INSTALL_HINT = "pip install 'torchscan_stages[serve]' (mlcommons-loadgen)"
POLL_S = 0.02


@dataclass(frozen=True)
class LoadgenOutput:
    detail: DetailLog
    trace: list[TraceSample]
    trace_error: str | None
    version: str | None


def loadgen_module() -> ModuleType:
    """LoadGen's Python module, or a one-line ImportError saying how to install it."""
    try:
        return importlib.import_module("mlperf_loadgen")
    except ImportError as error:
        raise ImportError(f"served runs need MLPerf LoadGen: {INSTALL_HINT}") from error


def loadgen_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mlcommons-loadgen")
    except PackageNotFoundError:
        return None


def completions(lg: ModuleType) -> tuple[Complete, FirstToken]:
    """LoadGen's QuerySamplesComplete and FirstTokenComplete in the loop's terms (no data:
    performance runs log no response bytes)."""

    def complete(done: list[tuple[int, int]]) -> None:
        lg.QuerySamplesComplete([lg.QuerySampleResponse(i, 0, 0, n) for i, n in done])

    def first_token(ident: int) -> None:
        lg.FirstTokenComplete([lg.QuerySampleResponse(ident, 0, 0)])

    return complete, first_token


def _settings(lg: ModuleType, fields: dict[str, Any]) -> Any:
    settings = lg.TestSettings()
    for name, value in fields.items():
        if name == "scenario":
            value = getattr(lg.TestScenario, value)
        elif name == "mode":
            value = getattr(lg.TestMode, value)
        setattr(settings, name, value)
    return settings


def _log_settings(lg: ModuleType, folder: str) -> Any:
    log = lg.LogSettings()
    log.log_output.outdir = folder
    log.log_output.copy_summary_to_stdout = False
    log.log_output.copy_detail_to_stdout = False
    log.enable_trace = True
    return log


def run_test(loop: ServerLoop, fields: dict[str, Any], sample_count: int) -> LoadgenOutput:
    """Run one test with LoadGen's ``fields`` serving ``sample_count`` samples through ``loop``.

    The loop's threads are started here and closed by the caller (it reads their records).
    LoadGen's objects are destroyed only once its test has ended, whatever was raised.
    """
    lg = loadgen_module()
    with tempfile.TemporaryDirectory(prefix="torchscan-serve-") as folder:
        settings = _settings(lg, fields)
        log = _log_settings(lg, folder)
        sut = qsl = test = None
        try:
            sut = lg.ConstructSUT(loop.issue, loop.flush)
            qsl = lg.ConstructQSL(sample_count, sample_count, _nothing, _nothing)
            loop.start()
            test = _Test(lg, (sut, qsl, settings, log, str(Path(folder) / "audit.config")))
            test.wait(loop)
        finally:
            if test is not None:
                test.wait_out(loop)  # never free LoadGen's objects under a running test
            loop.drain()
            if qsl is not None:
                lg.DestroyQSL(qsl)
            if sut is not None:
                lg.DestroySUT(sut)
        return _read_logs(Path(folder))


def _nothing(_: Any) -> None:
    """The QSL's load/unload: samples are the caller's objects, already in memory."""


class _Test:
    """LoadGen's test on a helper thread; its end is an Event (``Thread.join`` interrupted by
    a KeyboardInterrupt marks a still running thread as stopped on Python 3.11)."""

    def __init__(self, lg: ModuleType, arguments: tuple[Any, ...]) -> None:
        self.finished = threading.Event()
        self.failure: BaseException | None = None

        def start() -> None:
            try:
                lg.StartTestWithLogSettings(*arguments)
            except BaseException as error:  # reported on the caller's thread
                self.failure = error
            finally:
                self.finished.set()

        self.thread = threading.Thread(target=start, name="loadgen-test", daemon=True)
        self.thread.start()

    def wait(self, loop: ServerLoop) -> None:
        """Until the test ends; a KeyboardInterrupt drains the loop and is raised after."""
        interrupted = self.wait_out(loop)
        if interrupted is not None:
            raise interrupted
        if self.failure is not None:
            raise RuntimeError(f"LoadGen's test failed: {self.failure}") from self.failure

    def wait_out(self, loop: ServerLoop) -> BaseException | None:
        interrupted: BaseException | None = None
        while not self.finished.is_set():
            try:
                while not self.finished.wait(POLL_S):
                    loop.sweep()
            except BaseException as stop:  # KeyboardInterrupt: answer everything, let it end
                interrupted = interrupted or stop
                loop.fail(stop)
        self.thread.join()
        return interrupted


def _read_logs(folder: Path) -> LoadgenOutput:
    detail_path = folder / "mlperf_log_detail.txt"
    detail = parse_detail(detail_path.read_text(errors="replace") if detail_path.exists() else "")
    trace: list[TraceSample] = []
    trace_error = None
    trace_path = folder / "mlperf_log_trace.json"
    try:
        trace = parse_trace(trace_path.read_text(errors="replace"))
    except (OSError, ValueError, KeyError, TypeError) as error:
        trace_error = f"LoadGen's trace could not be read: {type(error).__name__}: {error}"
    return LoadgenOutput(detail, trace, trace_error, loadgen_version())
