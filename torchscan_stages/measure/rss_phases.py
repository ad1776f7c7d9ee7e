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

This module must stay importable without torch or any third-party package: it must not
inflate the phases it measures.
"""

from __future__ import annotations

import json
import os
import sys
import time

PHASE_FILE_ENV = "TORCHSCAN_STAGES_RSS_PHASE_FILE"


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


def mark_phase(name: str) -> dict[str, object]:
    """End phase ``name``: record its peak RSS for the measuring parent, start the next phase.

    Returns the record: ``name``, ``peak_bytes`` (peak RSS since the previous mark when the
    high-water mark could be reset, else since process start), ``rss_bytes`` (now),
    ``method`` ("vmhwm" or "ru_maxrss"), ``reset`` and a monotonic time stamp.
    """
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
        record["reset"] = method == "vmhwm" and _reset_high_water_mark()
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()
    return record
