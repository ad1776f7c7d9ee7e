"""Phase marks for a child measured by ``measure_peak_rss`` (standard library only).

Call ``mark_phase(name)`` at the END of each phase of the child program::

    import torch                                   # phase "import" ...
    from torchscan_stages.measure.rss_phases import mark_phase
    mark_phase("import")
    model = build_and_load()                       # phase "load" ...
    mark_phase("load")
    model(x)                                       # phase "execute" ...
    mark_phase("execute")

Each mark reads the process's own peak RSS since the previous mark (Linux: ``VmHWM`` in
``/proc/self/status``) and then resets that high-water mark to the current RSS (writing
``5`` to ``/proc/self/clear_refs``), so every phase gets its own peak. The record goes to
the JSON-lines file named by the environment variable :data:`PHASE_FILE_ENV`, which the
measuring parent sets. Without that variable (the program runs on its own) nothing is
written or reset and the reading is only returned.

The reset erases the kernel's own record of the phase's peak, so before it the mark waits
for the parent (the pipe named by :data:`PHASE_ACK_ENV`, at most :data:`ACK_WAIT_S`) to read
the same ``VmHWM`` itself: every phase peak is then an OS figure the parent saw, not only the
child's word for it (a peak reached between the parent's last sample and the reset once
went unseen, and a correct phase claim was refused as ``rss_phase_above_os``).

This module must stay importable without torch or any third-party package: it must not
inflate the phases it measures.
"""

from __future__ import annotations

import os
import sys

PHASE_FILE_ENV = "TORCHSCAN_STAGES_RSS_PHASE_FILE"
# "FD:DEV:INODE" of the pipe the parent acknowledges each record on (one byte per record)
PHASE_ACK_ENV = "TORCHSCAN_STAGES_RSS_PHASE_ACK"
ACK_WAIT_S = 30.0


def proc_status_bytes(field: str, pid: int | str = "self") -> int | None:
    """A ``kB`` field of ``/proc/PID/status`` (``VmHWM``, ``VmRSS``) in bytes; None off Linux.

    The one parser of these fields: the measuring parent samples its child with it and the
    rss launcher embeds its source, so it must use nothing but builtins.
    """
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def ru_maxrss_bytes() -> int | None:
    """This process's peak RSS from ``getrusage`` in bytes (kB on Linux, bytes on macOS)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(maxrss) if sys.platform == "darwin" else int(maxrss) * 1024


def _reset_high_water_mark() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _parent_pipe() -> int | None:
    """The parent's acknowledgement pipe, if this process has it (a grandchild started with
    ``close_fds`` does not, and its descriptor number may name another file: checked)."""
    try:
        fd, dev, ino = (int(part) for part in os.environ.get(PHASE_ACK_ENV, "").split(":"))
        info = os.fstat(fd)
    except (ValueError, OSError):
        return None
    import stat

    if not stat.S_ISFIFO(info.st_mode) or (info.st_dev, info.st_ino) != (dev, ino):
        return None
    return fd


def _await_parent(fd: int) -> None:
    """Block until the parent has read this process's high-water mark (one byte), it went
    away (end of file) or ``ACK_WAIT_S`` passed."""
    import select

    try:
        ready, _, _ = select.select([fd], [], [], ACK_WAIT_S)
        if ready:
            os.read(fd, 1)
    except (OSError, ValueError):
        pass


def mark_phase(name: str) -> dict[str, object]:
    """End phase ``name``: record its peak RSS for the measuring parent, start the next phase.

    Returns the record: ``name``, ``peak_bytes`` (peak RSS since the previous mark when the
    high-water mark could be reset, else since process start), ``rss_bytes`` (now),
    ``method`` ("vmhwm" or "ru_maxrss"), ``reset`` and a monotonic time stamp.
    """
    import json  # here, not at the top: the rss launcher loads this file and stays small
    import time

    if not isinstance(name, str) or not name.strip() or "\n" in name:
        raise ValueError(f"mark_phase: name must be a non-empty one-line string, got {name!r}")
    target = os.environ.get(PHASE_FILE_ENV)
    peak = proc_status_bytes("VmHWM")
    method = "vmhwm"
    if peak is None:
        peak = ru_maxrss_bytes()
        method = "ru_maxrss"
    record: dict[str, object] = {
        "name": name,
        "peak_bytes": peak,
        "rss_bytes": proc_status_bytes("VmRSS"),
        "method": method,
        "reset": False,
        "time": time.monotonic(),
        "pid": os.getpid(),
    }
    if target:
        # the record says whether the reset will happen: it is written before it, so the
        # parent can read the same high-water mark while the child waits
        clear_refs = "/proc/self/clear_refs"
        record["reset"] = method == "vmhwm" and os.access(clear_refs, os.W_OK)
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()
        pipe = _parent_pipe()
        if pipe is not None:
            _await_parent(pipe)
        if record["reset"]:
            _reset_high_water_mark()
    return record
