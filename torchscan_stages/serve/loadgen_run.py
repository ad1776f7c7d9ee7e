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
    """
    lg = loadgen_module()
    with tempfile.TemporaryDirectory(prefix="torchscan-serve-") as folder:
        settings = _settings(lg, fields)
        log = _log_settings(lg, folder)
        sut = qsl = None
        try:
            sut = lg.ConstructSUT(loop.issue, loop.flush)
            qsl = lg.ConstructQSL(sample_count, sample_count, _nothing, _nothing)
            loop.start()
            _start_and_wait(lg, sut, qsl, settings, log, loop, str(Path(folder) / "audit.config"))
        finally:
            loop.drain()  # whatever LoadGen left issued is answered before it is freed
            if qsl is not None:
                lg.DestroyQSL(qsl)
            if sut is not None:
                lg.DestroySUT(sut)
        return _read_logs(Path(folder))


def _nothing(_: Any) -> None:
    """The QSL's load/unload: samples are the caller's objects, already in memory."""


def _start_and_wait(
    lg: ModuleType, sut: Any, qsl: Any, settings: Any, log: Any, loop: ServerLoop, audit: str
) -> None:
    failure: list[BaseException] = []

    def start() -> None:
        try:
            lg.StartTestWithLogSettings(sut, qsl, settings, log, audit)
        except BaseException as error:  # reported on the caller's thread
            failure.append(error)

    runner = threading.Thread(target=start, name="loadgen-test", daemon=True)
    runner.start()
    interrupted: BaseException | None = None
    while runner.is_alive():
        try:
            runner.join(POLL_S)
            loop.sweep()
        except BaseException as stop:  # KeyboardInterrupt: drain, let LoadGen end, re-raise
            interrupted = interrupted or stop
            loop.fail(stop)
    if interrupted is not None:
        raise interrupted
    if failure:
        raise RuntimeError(f"LoadGen's test failed: {failure[0]}") from failure[0]


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
