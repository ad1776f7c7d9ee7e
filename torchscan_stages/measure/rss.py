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
  record gives the peak RSS of the phase that just ended. Before the mark resets the
  high-water mark, the parent reads it itself (a one-byte handshake on a pipe): a claim is
  kept only with that evidence, or within the OS's own figures (``rss_records``).

The launcher is ``rss_launcher.py`` (standard library only, run by path), the sampling and
the phase evidence ``rss_sampler.py``, the supervision of the child (watching, killing its
group, signals) ``rss_supervise.py``.

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
from dataclasses import dataclass
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
from .rss_phases import PHASE_ACK_ENV, PHASE_FILE_ENV
from .rss_records import PhaseRecords, read_phases, refuse_claims
from .rss_sampler import TREE_EVERY, PhaseWitness, Sampler
from .rss_supervise import (
    KILL_GRACE_S,
    FatalSignal,
    kill_child_on_signals,
    kill_group,
    kill_group_quietly,
    kill_now,
    watch,
)

DEFAULT_TIMEOUT_S = 600.0
DEFAULT_SAMPLE_INTERVAL_S = 0.02
TAIL_CHARS = 2000
LAUNCHER = Path(__file__).with_name("rss_launcher.py")


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


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-TAIL_CHARS:].decode("utf-8", errors="replace").strip()


@dataclass
class _ChildRun:
    """What the watched child left behind: how it ended, its accounting and its phases."""

    sampler: Sampler
    timed_out: bool
    wall: float
    returncode: int | None
    launcher: dict[str, int] | None
    stderr_tail: str
    records: PhaseRecords
    evidence: dict[int, int]

    @property
    def phases(self) -> list[RssPhase]:
        return self.records.phases


def _read_launcher(path: Path) -> dict[str, int] | None:
    try:
        launcher = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return launcher if isinstance(launcher, dict) else None


def _launch(
    argv: list[str], scratch: Path, workdir: Path | None, environment: dict[str, str] | None
) -> tuple[subprocess.Popen[bytes], PhaseWitness]:
    """Start the command under the launcher, in a new session, with the phase handshake:
    the read end of a pipe the child's ``mark_phase`` waits on (its number, device and inode
    in the environment), the write end kept here for the witness."""
    ack_read, ack_write = os.pipe()
    try:
        os.set_blocking(ack_write, False)  # records nobody waits for must never block us
        info = os.fstat(ack_read)
        child_env = dict(os.environ if environment is None else environment)
        child_env[PHASE_FILE_ENV] = str(scratch / "phases.jsonl")
        child_env[PHASE_ACK_ENV] = f"{ack_read}:{info.st_dev}:{info.st_ino}"
        launcher_argv = [sys.executable, "-I", "-S", str(LAUNCHER), str(scratch / "out.json")]
        with open(scratch / "stdout", "wb") as out, open(scratch / "stderr", "wb") as err:
            process = subprocess.Popen(
                [*launcher_argv, *argv],
                cwd=workdir,
                env=child_env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                pass_fds=(ack_read,),
            )
    except BaseException:
        os.close(ack_write)
        raise
    finally:
        os.close(ack_read)  # the child holds its own copy
    return process, PhaseWitness(scratch / "phases.jsonl", ack_write)


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
        started = time.monotonic()
        process, witness = _launch(argv, scratch, workdir, environment)
        try:
            sampler = Sampler(psutil.Process(process.pid), witness=witness)
            finished = timed_out = False
            try:
                with kill_child_on_signals(lambda: kill_now(process.pid, sampler)):
                    timed_out = watch(process, sampler, limit, interval)
                finished = not timed_out
            finally:
                if finished:
                    kill_group_quietly(process.pid, sampler)
                else:  # timed out, interrupted or failed: the whole group goes, now
                    kill_group(process.pid, sampler, grace=KILL_GRACE_S if timed_out else 0)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        process.wait(timeout=2)
        finally:
            os.close(witness.ack_fd)
        wall = time.monotonic() - started
        return _ChildRun(
            sampler=sampler,
            timed_out=timed_out,
            wall=wall,
            returncode=process.returncode,
            launcher=_read_launcher(scratch / "out.json"),
            stderr_tail=_tail(scratch / "stderr"),
            records=read_phases(scratch / "phases.jsonl", diagnostics),
            evidence=witness.evidence,
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


def _os_figure(run: _ChildRun) -> int:
    """The highest peak the OS itself reported: wait4's ru_maxrss, sampled VmHWM and RSS."""
    maxrss = int(run.launcher["maxrss_bytes"]) if run.launcher is not None else 0
    return max(maxrss, run.sampler.main_peak, run.sampler.tree_peak)


def _peak(run: _ChildRun, ok: bool, diagnostics: list[Diagnostic]) -> MetricResult:
    """The best known peak: exact kernel accounting when it is attributable, else samples."""
    # a refused claim makes the peak partial: the child's records and the OS disagree, and
    # a phase reset may have hidden the true high-water mark
    ok = not refuse_claims(run.records, run.evidence, _os_figure(run), diagnostics) and ok
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
    except FatalSignal as fatal:  # the child is gone and the handlers restored: die of it
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
