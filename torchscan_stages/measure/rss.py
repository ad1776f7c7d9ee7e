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
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
from .rss_phases import PHASE_FILE_ENV

DEFAULT_TIMEOUT_S = 600.0
DEFAULT_SAMPLE_INTERVAL_S = 0.02
KILL_GRACE_S = 0.5
TREE_EVERY = 5
TAIL_CHARS = 2000

_LAUNCHER = r"""
import json, os, sys
result_path, argv = sys.argv[1], sys.argv[2:]
def own_peak():
    try:
        with open('/proc/self/status') as handle:
            for line in handle:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource
    value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return value if sys.platform == 'darwin' else value * 1024
floor = own_peak()
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
if os.WIFEXITED(status):
    os._exit(os.WEXITSTATUS(status))
os._exit(128 + os.WTERMSIG(status))
"""


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


def _vmhwm(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


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
            peak = _vmhwm(self.main.pid)
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


def _kill_group(pgid: int, sampler: _Sampler) -> None:
    """SIGTERM the process group, then SIGKILL it and any known descendant that escaped it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        if sig == signal.SIGTERM:
            deadline = time.monotonic() + KILL_GRACE_S
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


def _read_phases(path: Path, diagnostics: list[Diagnostic]) -> list[RssPhase]:
    phases: list[RssPhase] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return phases
    previous_reset = True
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
            name = str(record["name"])
            peak = record["peak_bytes"]
            reset = bool(record.get("reset", False))
        except (ValueError, KeyError, TypeError):
            diagnostics.append(
                Diagnostic(
                    code="rss_phase_unreadable",
                    metric="rss.phases",
                    message=f"phase record {number} is not a mark_phase record: {line[:200]!r}",
                )
            )
            continue
        scope = "process_rss_phase" if previous_reset else "process_rss_since_start"
        method = "os_vmhwm" if record.get("method") == "vmhwm" else "os_ru_maxrss"
        if isinstance(peak, int) and peak >= 0:
            result = MetricResult.complete(peak, unit="bytes", scope=scope, method=method)
        else:
            result = MetricResult.unavailable(unit="bytes", scope=scope, method=method)
        phases.append(RssPhase(name=name, peak_rss=result))
        previous_reset = reset
    return phases


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
    number: incomplete runs give ``partial``/``unavailable`` plus a diagnostic.
    """
    argv, limit, workdir, environment = validate_rss_options(
        command, timeout, cwd, env, sample_interval
    )
    diagnostics: list[Diagnostic] = []
    with tempfile.TemporaryDirectory(prefix="torchscan_rss_") as scratch_name:
        scratch = Path(scratch_name)
        result_file = scratch / "launcher.json"
        phase_file = scratch / "phases.jsonl"
        child_env = dict(os.environ if environment is None else environment)
        child_env[PHASE_FILE_ENV] = str(phase_file)
        launcher_argv = [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(result_file), *argv]
        with open(scratch / "stdout", "wb") as out, open(scratch / "stderr", "wb") as err:
            started = time.monotonic()
            process = subprocess.Popen(
                launcher_argv,
                cwd=workdir,
                env=child_env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            sampler = _Sampler(psutil.Process(process.pid))
            deadline = started + limit
            timed_out = False
            while True:
                sampler.sample()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    sampler.sample_tree()  # know every descendant, also any that left the group
                    _kill_group(process.pid, sampler)
                    process.wait(timeout=2)
                    break
                try:
                    process.wait(timeout=min(sample_interval, remaining))
                    break
                except subprocess.TimeoutExpired:
                    continue
            wall = time.monotonic() - started
            if not timed_out:
                _kill_group_quietly(process.pid, sampler)
        stderr_tail = _tail(scratch / "stderr")
        launcher: dict[str, int] | None = None
        if result_file.exists():
            try:
                launcher = json.loads(result_file.read_text(encoding="utf-8"))
            except ValueError:
                launcher = None
        phases = _read_phases(phase_file, diagnostics)

    exit_code: int | None = None
    killed_by: int | None = None
    if launcher is not None:
        status = int(launcher["status"])
        if os.WIFEXITED(status):
            exit_code = os.WEXITSTATUS(status)
        elif os.WIFSIGNALED(status):
            killed_by = os.WTERMSIG(status)
            exit_code = -killed_by
    elif not timed_out:
        exit_code = process.returncode

    phase_peaks = [p.peak_rss.value for p in phases if p.peak_rss.value is not None]
    known: list[int] = [int(v) for v in phase_peaks]
    if sampler.main_peak:
        known.append(sampler.main_peak)
    kernel_exact = False
    floor = None
    if launcher is not None:
        floor = int(launcher["floor_bytes"])
        maxrss = int(launcher["maxrss_bytes"])
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

    ok = not timed_out and exit_code == 0 and killed_by is None
    scope, unit = "process_rss", "bytes"
    method = "os_accounting" if kernel_exact else "os_sampling"
    if ok and kernel_exact and best is not None:
        peak = MetricResult.complete(best, unit=unit, scope=scope, method=method)
    elif best is not None:
        peak = MetricResult.partial(best, unit=unit, scope=scope, method=method)
    else:
        peak = MetricResult.unavailable(unit=unit, scope=scope, method=method)
    shown = f"; stderr tail: {stderr_tail[-500:]}" if stderr_tail else ""
    if timed_out:
        diagnostics.append(
            Diagnostic(
                code="child_timeout",
                severity="error",
                metric="rss.peak",
                message=f"{argv!r} outlived its timeout of {limit:g} s; its process group was "
                f"killed; the peak is the sampled lower bound ({sampler.samples} samples)" + shown,
            )
        )
    elif killed_by is not None:
        diagnostics.append(
            Diagnostic(
                code="child_killed",
                severity="error",
                metric="rss.peak",
                message=f"{argv!r} was killed by signal {killed_by} "
                f"({signal.Signals(killed_by).name}); the peak covers only what ran" + shown,
            )
        )
    elif exit_code != 0:
        diagnostics.append(
            Diagnostic(
                code="child_exit_nonzero",
                severity="error",
                metric="rss.peak",
                message=f"{argv!r} exited with code {exit_code}; the peak covers only what "
                "ran before it failed" + shown,
            )
        )
    tree = (
        MetricResult.partial(
            sampler.tree_peak, unit=unit, scope="process_tree_rss", method="psutil_sampling"
        )
        if sampler.tree_samples
        else MetricResult.unavailable(unit=unit, scope="process_tree_rss", method="psutil_sampling")
    )
    detail = (
        "peak = max(wait4 ru_maxrss of the command forked from a small launcher, sampled "
        f"VmHWM, phase VmHWM marks); launcher floor {floor} bytes; sampling every "
        f"{sample_interval:g} s ({sampler.samples} samples); tree peak = sum of RSS over all "
        f"descendants sampled every {TREE_EVERY * sample_interval:g} s ({sampler.tree_samples} "
        "samples, lower bound)"
    )
    section = RssSection(
        peak=peak,
        command=argv,
        exit_code=exit_code,
        wall_time_s=wall,
        timed_out=timed_out,
        timeout_s=limit,
        phases=phases,
        method_detail=detail,
        tree_peak=tree,
        samples=sampler.samples,
        sample_interval_s=sample_interval,
        signal=killed_by,
    )
    return BenchmarkReport(
        provenance=build_provenance(),
        name=name,
        execution=_child_execution(),
        rss=section,
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
