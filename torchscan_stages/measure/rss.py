"""Peak resident set size of a command run as a fresh child process.

Method (Linux and macOS):

* The command runs under a tiny launcher (``python -I -S``, about 9 MiB) started in a new
  session, so the whole process group can be killed. The launcher ``fork``s and ``exec``s
  the command and collects it with ``wait4``: ``ru_maxrss`` is the kernel's exact peak RSS
  of the command's process (and of its largest waited-for descendant).
* Why the launcher: Linux copies the high-water mark of the pre-exec memory into
  ``ru_maxrss`` at ``exec``. A child spawned directly from a large parent (this process, with
  torch loaded) therefore reports at least the parent's peak, so ``python -c pass`` would look
  hundreds of MiB large. Forked from the small launcher, the inherited floor is only the
  launcher's own peak (recorded as ``floor_bytes``); a ``ru_maxrss`` above it is the child's
  own. At or below the floor it is ambiguous, and only sampled lower bounds are reported.
* Sampling every ``sample_interval`` seconds: the command's ``VmHWM`` (Linux high-water mark,
  immune to the inheritance; exact up to the last sample before exit) and the summed RSS of
  the launcher's whole descendant tree (scope ``process_tree_rss``, psutil, granularity one
  interval). Sampled values are lower bounds, used when kernel accounting is missing.
* Phases: the child may call ``torchscan_stages.measure.rss_phases.mark_phase(name)``; each
  record gives the peak RSS of the phase that just ended.

A command that exits non-zero or is killed by a signal gives a ``partial`` peak (what it used
before failing) plus ``child_exit_nonzero`` / ``child_killed``; a command that outlives
``timeout`` has its whole process group killed and gives a ``partial`` sampled peak (or
``unavailable`` when no sample was taken) plus ``child_timeout``.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import psutil

from ..provenance import build_provenance
from ..report import (
    BenchmarkReport,
    Diagnostic,
    ExecutionRecord,
    MetricResult,
    RssPhase,
    RssSection,
)
from . import rss_phases
from .rss_phases import PHASE_FILE_ENV

DEFAULT_TIMEOUT_S = 600.0
DEFAULT_SAMPLE_INTERVAL_S = 0.02
KILL_GRACE_S = 0.5
TREE_EVERY = 5
TAIL_CHARS = 2000

_LAUNCHER_BODY = r"""
import json, os, signal, sys
result_path, argv = sys.argv[1], sys.argv[2:]
if sys.platform.startswith('linux'):
    # a subreaper: descendants orphaned on the way (a daemon that forked, setsid'd and forked
    # again) are re-parented here, not to init, so they can be ended with the command
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def children():
    found = []
    for entry in os.listdir('/proc') if os.path.isdir('/proc') else []:
        if entry.isdigit():
            try:
                with open('/proc/%s/stat' % entry, 'rb') as handle:
                    stat = handle.read()
            except OSError:
                continue
            if int(stat[stat.rindex(b')') + 2:].split()[1]) == os.getpid():
                found.append(int(entry))
    return found


def end_descendants():
    # SIGKILL every child (orphans re-parent here as their parents die), reap, repeat
    while True:
        for child in children():
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def on_term(number, frame):
    end_descendants()
    os._exit(128 + number)


signal.signal(signal.SIGTERM, on_term)
floor = proc_status_bytes('VmHWM') or ru_maxrss_bytes()  # what exec carries over, read last
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    except OSError as error:
        os.write(2, ('torchscan_stages rss launcher: cannot execute %r: %s\n'
                     % (argv[0], error)).encode())
    os._exit(127)
_, status, usage = os.wait4(pid, 0)
maxrss = usage.ru_maxrss if sys.platform == 'darwin' else usage.ru_maxrss * 1024
with open(result_path + '.tmp', 'w') as handle:
    json.dump({'pid': pid, 'status': status, 'maxrss_bytes': maxrss, 'floor_bytes': floor},
              handle)
os.replace(result_path + '.tmp', result_path)
end_descendants()
if os.WIFEXITED(status):
    os._exit(os.WEXITSTATUS(status))
os._exit(128 + os.WTERMSIG(status))
"""
# the launcher reads its own peak with the same parsers as the phase marks (defined once)
_LAUNCHER = "\n".join(
    [
        "import sys",
        inspect.getsource(rss_phases.proc_status_bytes),
        inspect.getsource(rss_phases.ru_maxrss_bytes),
        _LAUNCHER_BODY,
    ]
)


def validate_rss_options(
    command: object, timeout: object, cwd: object, env: object, sample_interval: object
) -> tuple[list[str], float, Path | None, dict[str, str] | None]:
    if isinstance(command, (str, bytes)) or not isinstance(command, Sequence):
        raise TypeError(
            "command must be a list of strings such as [sys.executable, 'script.py'], got "
            f"{type(command).__name__} (a shell string is not split or interpreted)"
        )
    argv = list(command)
    if not argv:
        raise ValueError("command must not be empty")
    for index, part in enumerate(argv):
        if not isinstance(part, str):
            raise TypeError(f"command[{index}] must be a str, got {type(part).__name__}")
    for name, value in (("timeout", timeout), ("sample_interval", sample_interval)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__}")
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    workdir: Path | None = None
    if cwd is not None:
        if not isinstance(cwd, (str, os.PathLike)):
            raise TypeError(f"cwd must be a path or None, got {type(cwd).__name__}")
        workdir = Path(cwd)
        if not workdir.is_dir():
            raise ValueError(f"cwd={str(cwd)!r} is not an existing directory")
    environment: dict[str, str] | None = None
    if env is not None:
        if not isinstance(env, Mapping):
            raise TypeError(
                f"env must be a mapping of str to str or None, got {type(env).__name__}"
            )
        for key, value in env.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(f"env[{key!r}] must map str to str, got {value!r}")
        environment = dict(env)
    program = argv[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        path = (
            Path(program) if workdir is None or Path(program).is_absolute() else workdir / program
        )
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ValueError(f"command[0]={program!r} is not an executable file")
    else:
        search = (environment or os.environ).get("PATH", os.defpath)
        if shutil.which(program, path=search) is None:
            raise ValueError(f"command[0]={program!r} was not found on PATH")
    return argv, float(timeout), workdir, environment  # type: ignore[arg-type]


@dataclass
class _Sampler:
    """Polls the launcher's descendants.

    Every tick: the command's own high-water mark (one small /proc read). Every
    ``TREE_EVERY`` ticks: the RSS sum over all descendants (psutil walks every process, so
    it is kept off the fast path).
    """

    launcher: psutil.Process
    main_peak: int = 0
    tree_peak: int = 0
    samples: int = 0
    tree_samples: int = 0
    ticks: int = 0
    main: psutil.Process | None = None
    known: dict[int, psutil.Process] = field(default_factory=dict)

    def sample(self) -> None:
        self.ticks += 1
        if self.main is None:
            try:
                direct = self.launcher.children(recursive=False)
            except psutil.Error:
                direct = []
            if direct:
                self.main = direct[0]
                self.known.setdefault(self.main.pid, self.main)
        if self.main is not None:
            peak = rss_phases.proc_status_bytes("VmHWM", self.main.pid)
            if peak is None:
                try:
                    peak = self.main.memory_info().rss
                except psutil.Error:
                    peak = None
            if peak is not None:
                self.samples += 1
                self.main_peak = max(self.main_peak, peak)
        if self.ticks % TREE_EVERY == 1:
            self.sample_tree()

    def sample_tree(self) -> None:
        try:
            children = self.launcher.children(recursive=True)
        except psutil.Error:
            return
        total = 0
        for child in children:
            self.known.setdefault(child.pid, child)
            try:
                total += child.memory_info().rss
            except psutil.Error:
                continue
        if children:
            self.tree_samples += 1
            self.tree_peak = max(self.tree_peak, total)


def _kill_group(pgid: int, sampler: _Sampler, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM the process group, then SIGKILL it and any known descendant that escaped it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        if sig == signal.SIGTERM:
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                try:
                    os.killpg(pgid, 0)
                except (ProcessLookupError, PermissionError):
                    break
                time.sleep(0.02)
    for process in sampler.known.values():
        with contextlib.suppress(psutil.Error):
            process.kill()


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-TAIL_CHARS:].decode("utf-8", errors="replace").strip()


def _phase_diagnostic(number: int, line: str, why: str) -> Diagnostic:
    return Diagnostic(
        code="rss_phase_unreadable",
        metric="rss.phases",
        message=f"phase record {number} is not a mark_phase record ({why}): {line[:200]!r}",
    )


def _read_phases(path: Path, diagnostics: list[Diagnostic]) -> list[RssPhase]:
    """The child's phase records; a record that is not one of mark_phase's is a diagnostic."""
    phases: list[RssPhase] = []
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return phases
    previous_reset = True
    for number, raw in enumerate(lines, start=1):
        line = raw.decode("utf-8", errors="replace")
        try:
            record = json.loads(raw.decode("utf-8"))
            name, peak = record["name"], record["peak_bytes"]
            reset = record.get("reset", False)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
            why = "not UTF-8" if isinstance(error, UnicodeDecodeError) else "not a JSON object"
            diagnostics.append(_phase_diagnostic(number, line, why))
            continue
        if not isinstance(name, str) or not isinstance(reset, bool):
            diagnostics.append(_phase_diagnostic(number, line, "name or reset of a wrong type"))
            continue
        if peak is not None and (type(peak) is not int or peak < 0):
            diagnostics.append(_phase_diagnostic(number, line, "peak_bytes is not a byte count"))
            peak = None
        scope = "process_rss_phase" if previous_reset else "process_rss_since_start"
        method = "os_vmhwm" if record.get("method") == "vmhwm" else "os_ru_maxrss"
        if peak is not None:
            result = MetricResult.complete(peak, unit="bytes", scope=scope, method=method)
        else:
            result = MetricResult.unavailable(unit="bytes", scope=scope, method=method)
        phases.append(RssPhase(name=name, peak_rss=result))
        previous_reset = reset
    return phases


class _FatalSignal(BaseException):
    """A signal whose default action ends the process, delivered again once cleanup ran."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number


@contextlib.contextmanager
def _kill_child_on_signals(kill: Callable[[], None]) -> Iterator[None]:
    """While the child runs, SIGINT/SIGTERM/SIGHUP of this process first kill the child.

    The child lives in its own session, so nothing else would stop it when this process is
    interrupted. Each handler kills the child's process group, restores the previous
    handlers and then does what the previous handler would have done (raise
    KeyboardInterrupt, call it, or unwind and die of the signal). Handlers can only be
    installed from the main thread; elsewhere the caller's ``finally`` is the only guard.
    Ignored signals stay ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def restore() -> None:
        for number, handler in previous.items():
            signal.signal(number, handler)

    def on_signal(number: int, frame: FrameType | None) -> None:
        kill()
        restore()
        handler = previous[number]
        if callable(handler):
            handler(number, frame)
        else:  # SIG_DFL: unwind (temporary files go), then die of the signal
            raise _FatalSignal(number)

    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        number = getattr(signal, name, None)
        if number is None:
            continue
        handler = signal.getsignal(number)
        if handler is None or handler is signal.SIG_IGN:
            continue
        previous[number] = handler
        signal.signal(number, on_signal)
    try:
        yield
    finally:
        restore()


@dataclass
class _ChildRun:
    """What the watched child left behind: how it ended, its accounting and its phases."""

    sampler: _Sampler
    timed_out: bool
    wall: float
    returncode: int | None
    launcher: dict[str, int] | None
    stderr_tail: str
    phases: list[RssPhase]


def _watch(
    process: subprocess.Popen[bytes], sampler: _Sampler, limit: float, interval: float
) -> bool:
    """Sample until the launcher exits (False) or ``limit`` seconds pass (True: timed out)."""
    deadline = time.monotonic() + limit
    while True:
        sampler.sample()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            sampler.sample_tree()  # know every descendant, also any that left the group
            return True
        try:
            process.wait(timeout=min(interval, remaining))
            return False
        except subprocess.TimeoutExpired:
            continue


def _read_launcher(path: Path) -> dict[str, int] | None:
    try:
        launcher = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return launcher if isinstance(launcher, dict) else None


def _run_child(
    argv: list[str],
    limit: float,
    workdir: Path | None,
    environment: dict[str, str] | None,
    interval: float,
    diagnostics: list[Diagnostic],
) -> _ChildRun:
    """Run the command under the launcher; whatever happens, its process group is gone after."""
    with tempfile.TemporaryDirectory(prefix="torchscan_rss_") as scratch_name:
        scratch = Path(scratch_name)
        child_env = dict(os.environ if environment is None else environment)
        child_env[PHASE_FILE_ENV] = str(scratch / "phases.jsonl")
        launcher_argv = [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(scratch / "out.json")]
        with open(scratch / "stdout", "wb") as out, open(scratch / "stderr", "wb") as err:
            started = time.monotonic()
            process = subprocess.Popen(
                [*launcher_argv, *argv],
                cwd=workdir,
                env=child_env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            sampler = _Sampler(psutil.Process(process.pid))
            finished = timed_out = False
            try:
                with _kill_child_on_signals(lambda: _kill_now(process.pid, sampler)):
                    timed_out = _watch(process, sampler, limit, interval)
                finished = not timed_out
            finally:
                if finished:
                    _kill_group_quietly(process.pid, sampler)
                else:  # timed out, interrupted or failed: the whole group goes, now
                    _kill_group(process.pid, sampler, grace=KILL_GRACE_S if timed_out else 0)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        process.wait(timeout=2)
            wall = time.monotonic() - started
        return _ChildRun(
            sampler=sampler,
            timed_out=timed_out,
            wall=wall,
            returncode=process.returncode,
            launcher=_read_launcher(scratch / "out.json"),
            stderr_tail=_tail(scratch / "stderr"),
            phases=_read_phases(scratch / "phases.jsonl", diagnostics),
        )


def _exit_status(run: _ChildRun) -> tuple[int | None, int | None]:
    """(exit code, killing signal) of the command, from the launcher's wait4 status."""
    if run.launcher is not None:
        status = int(run.launcher["status"])
        if os.WIFEXITED(status):
            return os.WEXITSTATUS(status), None
        if os.WIFSIGNALED(status):
            return -os.WTERMSIG(status), os.WTERMSIG(status)
        return None, None
    return (None if run.timed_out else run.returncode), None


RESET_SLACK_BYTES = 2**20


def _os_figure(run: _ChildRun) -> int:
    """The highest peak the OS itself reported: wait4's ru_maxrss, sampled VmHWM and RSS."""
    maxrss = int(run.launcher["maxrss_bytes"]) if run.launcher is not None else 0
    return max(maxrss, run.sampler.main_peak, run.sampler.tree_peak)


def _refuse_claims_above_os(run: _ChildRun, diagnostics: list[Diagnostic]) -> bool:
    """Phase records are the child's own claims: one above every figure the OS gave for it
    (a record written by hand, not by mark_phase) is refused, never a complete peak.

    Returns whether a claim was refused (the peak is then partial: the child's records and
    the OS disagree, and a phase reset may have hidden the true high-water mark)."""
    os_figure = _os_figure(run)
    # mark_phase resets the high-water mark, so the kernel's exit figure (ru_maxrss) is the
    # mark after the last reset: a true phase peak read just before a reset can sit a few
    # pages above it (measured: 172-242 KiB above on a 211 MiB phase). That gap is allowed;
    # a claim beyond it has no evidence from the OS.
    ceiling = os_figure + RESET_SLACK_BYTES + os_figure // 100
    refused = False
    for index, phase in enumerate(run.phases):
        claim = phase.peak_rss.value
        if claim is None or claim <= ceiling:
            continue
        refused = True
        result = phase.peak_rss
        unavailable = MetricResult.unavailable(
            unit=result.unit, scope=result.scope, method=result.method
        )
        run.phases[index] = phase.model_copy(update={"peak_rss": unavailable})
        diagnostics.append(
            Diagnostic(
                code="rss_phase_above_os",
                severity="error",
                metric="rss.phases",
                message=f"phase {phase.name!r} claims a peak of {claim} bytes, above every "
                f"figure the OS gave for the child (at most {os_figure} bytes: wait4 ru_maxrss, "
                "sampled VmHWM and RSS, plus 1 MiB + 1% for a high-water reset at a phase "
                "mark); the claim is not counted",
            )
        )
    return refused


def _peak(run: _ChildRun, ok: bool, diagnostics: list[Diagnostic]) -> MetricResult:
    """The best known peak: exact kernel accounting when it is attributable, else samples."""
    ok = not _refuse_claims_above_os(run, diagnostics) and ok
    known = [int(p.peak_rss.value) for p in run.phases if p.peak_rss.value is not None]
    if run.sampler.main_peak:
        known.append(run.sampler.main_peak)
    kernel_exact = False
    if run.launcher is not None:
        floor, maxrss = int(run.launcher["floor_bytes"]), int(run.launcher["maxrss_bytes"])
        if maxrss > floor:
            known.append(maxrss)
            kernel_exact = True
        else:
            diagnostics.append(
                Diagnostic(
                    code="rss_below_launcher_floor",
                    severity="info",
                    metric="rss.peak",
                    message=f"the kernel's peak ({maxrss} bytes) does not exceed the launcher's "
                    f"own peak ({floor} bytes) that exec carries over, so it cannot be "
                    "attributed to the command; only sampled lower bounds are reported",
                )
            )
    best = max(known) if known else None
    scope, unit = "process_rss", "bytes"
    method = "os_accounting" if kernel_exact else "os_sampling"
    if ok and kernel_exact and best is not None:
        return MetricResult.complete(best, unit=unit, scope=scope, method=method)
    if best is not None:
        return MetricResult.partial(best, unit=unit, scope=scope, method=method)
    return MetricResult.unavailable(unit=unit, scope=scope, method=method)


def _failure(
    argv: list[str], run: _ChildRun, limit: float, exit_code: int | None, killed_by: int | None
) -> Diagnostic | None:
    """Why the peak is only a lower bound: timeout, a killing signal or a non-zero exit."""
    shown = f"; stderr tail: {run.stderr_tail[-500:]}" if run.stderr_tail else ""
    if run.timed_out:
        code = "child_timeout"
        message = (
            f"{argv!r} outlived its timeout of {limit:g} s; its process group was killed; "
            f"the peak is the sampled lower bound ({run.sampler.samples} samples)"
        )
    elif killed_by is not None:
        code = "child_killed"
        message = (
            f"{argv!r} was killed by signal {killed_by} ({signal.Signals(killed_by).name}); "
            "the peak covers only what ran"
        )
    elif exit_code != 0:
        code = "child_exit_nonzero"
        message = (
            f"{argv!r} exited with code {exit_code}; the peak covers only what ran before it failed"
        )
    else:
        return None
    return Diagnostic(code=code, severity="error", metric="rss.peak", message=message + shown)


def _section(
    argv: list[str], run: _ChildRun, limit: float, interval: float, peak: MetricResult
) -> RssSection:
    sampler = run.sampler
    floor = run.launcher["floor_bytes"] if run.launcher is not None else None
    exit_code, killed_by = _exit_status(run)
    tree_scope, tree_method = "process_tree_rss", "psutil_sampling"
    tree = (
        MetricResult.partial(sampler.tree_peak, unit="bytes", scope=tree_scope, method=tree_method)
        if sampler.tree_samples
        else MetricResult.unavailable(unit="bytes", scope=tree_scope, method=tree_method)
    )
    detail = (
        "peak = max(wait4 ru_maxrss of the command forked from a small launcher, sampled "
        f"VmHWM, phase VmHWM marks); launcher floor {floor} bytes; sampling every "
        f"{interval:g} s ({sampler.samples} samples); tree peak = sum of RSS over all "
        f"descendants sampled every {TREE_EVERY * interval:g} s ({sampler.tree_samples} "
        "samples, lower bound)"
    )
    return RssSection(
        peak=peak,
        command=argv,
        exit_code=exit_code,
        wall_time_s=run.wall,
        timed_out=run.timed_out,
        timeout_s=limit,
        phases=run.phases,
        method_detail=detail,
        tree_peak=tree,
        samples=sampler.samples,
        sample_interval_s=interval,
        signal=killed_by,
    )


def measure_peak_rss(
    command: Sequence[str],
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    sample_interval: float = DEFAULT_SAMPLE_INTERVAL_S,
    name: str | None = None,
) -> BenchmarkReport:
    """Run ``command`` (a list of strings) as a fresh child; report its peak RSS from the OS.

    ``env`` replaces the environment (as in subprocess; None inherits it); ``timeout`` is in
    seconds, after which the whole process group is killed. Never hangs, never invents a
    number: incomplete runs give ``partial``/``unavailable`` plus a diagnostic. Never leaves
    the child behind: an exception, Ctrl-C, SIGTERM or SIGHUP of this process kills its
    process group first.
    """
    argv, limit, workdir, environment = validate_rss_options(
        command, timeout, cwd, env, sample_interval
    )
    diagnostics: list[Diagnostic] = []
    try:
        run = _run_child(argv, limit, workdir, environment, sample_interval, diagnostics)
    except _FatalSignal as fatal:  # the child is gone and the handlers restored: die of it
        os.kill(os.getpid(), fatal.number)
        raise
    exit_code, killed_by = _exit_status(run)
    ok = not run.timed_out and exit_code == 0 and killed_by is None
    peak = _peak(run, ok, diagnostics)
    failure = _failure(argv, run, limit, exit_code, killed_by)
    if failure is not None:
        diagnostics.append(failure)
    return BenchmarkReport(
        provenance=build_provenance(),
        name=name,
        execution=_child_execution(),
        rss=_section(argv, run, limit, sample_interval, peak),
        diagnostics=diagnostics,
    )


def _child_execution() -> ExecutionRecord:
    """The measured work runs in the child, so only the measuring process is described here."""
    import torch

    return ExecutionRecord(
        device="child_process",
        num_threads=torch.get_num_threads(),
        num_interop_threads=torch.get_num_interop_threads(),
        grad_enabled=torch.is_grad_enabled(),
        calls={},
    )


def _kill_now(pgid: int, sampler: _Sampler) -> None:
    """SIGKILL the process group and every known descendant, without waiting (signal-safe)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for process in list(sampler.known.values()):
        with contextlib.suppress(psutil.Error):
            process.kill()


def _kill_group_quietly(pgid: int, sampler: _Sampler) -> None:
    """After a normal exit, remove leftovers of the command's process group without waiting."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for process in sampler.known.values():
        try:
            if process.is_running():
                process.kill()
        except psutil.Error:
            pass
