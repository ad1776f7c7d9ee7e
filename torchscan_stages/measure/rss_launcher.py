"""The small launcher ``measure_peak_rss`` runs the command under (standard library only).

Run by path, never imported by the package::

    python -I -S .../measure/rss_launcher.py RESULT.json COMMAND [ARG ...]

Why it exists: Linux copies the pre-exec high-water mark into ``ru_maxrss`` at ``exec``, so
a command spawned straight from the measuring process (torch loaded) would report at least
that process's peak. Forked from this small interpreter (``-I -S``: no site, about 9 MiB),
the inherited floor is only the launcher's own peak, written as ``floor_bytes``; a
``ru_maxrss`` above it is the command's own. It forks and execs the command, collects it
with ``wait4`` (the kernel's exact peak), writes ``{pid, status, maxrss_bytes,
floor_bytes}`` to RESULT.json and exits with the command's code (128 + N after signal N).

On Linux it is a child subreaper: descendants orphaned on the way (a daemon that forked,
``setsid``'d and forked again) are re-parented here, so it SIGKILLs and reaps every one of
them before it exits, and on SIGTERM. It reads its own peak with ``rss_phases`` (run from
beside this file: the one parser of ``/proc/PID/status``). It imports as little as it can
(no pathlib, importlib or json): every module it loads raises the floor.
"""

from __future__ import annotations

import os
import signal
import sys

TYPE_CHECKING = False  # typing itself costs ~40 ms and its modules' pages: not imported
if TYPE_CHECKING:
    from typing import Any

PR_SET_CHILD_SUBREAPER = 36


def _phases_module() -> dict[str, Any]:
    """The namespace of ``rss_phases.py`` beside this file (the package is not on ``-I``'s
    path, and importlib would cost more than the file itself)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rss_phases.py")
    with open(path, encoding="utf-8") as handle:
        code = compile(handle.read(), path, "exec")
    namespace: dict[str, Any] = {"__name__": "torchscan_rss_phases"}
    exec(code, namespace)  # the package's own file, beside this one
    return namespace


def _become_subreaper() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _children() -> list[int]:
    """This process's direct children, from ``/proc`` (empty where there is none)."""
    found = []
    entries = os.listdir("/proc") if os.path.isdir("/proc") else []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        if int(stat[stat.rindex(b")") + 2 :].split()[1]) == os.getpid():
            found.append(int(entry))
    return found


def _end_descendants() -> None:
    """SIGKILL every child (orphans re-parent here as their parents die), reap, repeat."""
    while True:
        for child in _children():
            try:  # noqa: SIM105 (contextlib is one more module under the floor)
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _on_term(number: int, frame: object) -> None:
    _end_descendants()
    os._exit(128 + number)


def main(result_path: str, argv: list[str]) -> None:
    _become_subreaper()
    signal.signal(signal.SIGTERM, _on_term)
    phases = _phases_module()
    # What exec carries over into the command is the forked copy's high-water mark, which
    # fork starts at the copy's resident size, not at this process's peak: so the launcher's
    # own peak (compiling its code, loading ctypes) is reset first, and the floor is what is
    # resident now, read last (Linux; elsewhere the peak, which is higher: conservative).
    phases["_reset_high_water_mark"]()
    floor = phases["proc_status_bytes"]("VmHWM") or phases["ru_maxrss_bytes"]()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        except OSError as error:
            message = f"torchscan_stages rss launcher: cannot execute {argv[0]!r}: {error}\n"
            os.write(2, message.encode())
        os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    maxrss = usage.ru_maxrss if sys.platform == "darwin" else usage.ru_maxrss * 1024
    fields = {"pid": pid, "status": status, "maxrss_bytes": maxrss, "floor_bytes": floor}
    record = ", ".join(f'"{key}": {int(value or 0)}' for key, value in fields.items())
    with open(result_path + ".tmp", "w", encoding="utf-8") as handle:
        handle.write("{" + record + "}")  # JSON of four integers: json (and re) not loaded
    os.replace(result_path + ".tmp", result_path)
    _end_descendants()
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    os._exit(128 + os.WTERMSIG(status))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
