"""Report files: reading bytes (gzip by content), the atomic write, and saving a report.

Every file the package writes goes through :func:`atomic_write_text` (or, for the pipeline
runner's all-or-nothing write of several outputs, :func:`write_temporary` followed by a rename).
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import os
import re
import tempfile
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .._signals import ending_signals_raise
from .codec import dump_text, encode_report
from .metric import GZIP_MAGIC, SCHEMA_VERSION

MIB = 2**20
# the largest report measured (a 5,000-layer model) is 27.6 MB compact and 376 MB as version 1
# wrote it; a file, or a gzip member expanding, beyond this is refused before it is read whole
MAX_REPORT_BYTES = 1024 * MIB
MAX_GZIP_EXPANDED_BYTES = 256 * MIB  # compact reports: 0.65 MB gzip -> 27.6 MB of text
MAX_BYTES_ENV = "TORCHSCAN_STAGES_MAX_REPORT_MB"
_CHUNK = 4 * MIB


def report_byte_limit(default: int = MAX_REPORT_BYTES) -> int:
    """The size cap on a report's text: ``TORCHSCAN_STAGES_MAX_REPORT_MB`` when set."""
    value = os.environ.get(MAX_BYTES_ENV, "")
    return int(float(value) * MIB) if value.strip().replace(".", "", 1).isdigit() else default


def _too_large(where: str, size: str, limit: int) -> ValueError:
    return ValueError(
        f"{where}: refused: {size}, over the report size limit of {limit // MIB} MiB "
        f"(raise it with {MAX_BYTES_ENV}=N if this file is a report you trust)"
    )


def _gunzip(data: bytes, where: str) -> bytes:
    """Decompress every gzip member, streaming, refusing once the text passes the cap:
    a 400 KB file that expands to 400 MB is stopped at the cap, never expanded in full."""
    limit = report_byte_limit(MAX_GZIP_EXPANDED_BYTES)
    out = bytearray()
    rest = data
    while rest:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        pending = rest
        while not inflater.eof:
            chunk = inflater.decompress(pending, _CHUNK)
            out += chunk
            if len(out) > limit:
                raise _too_large(where, f"its gzip data expands past {limit // MIB} MiB", limit)
            pending = inflater.unconsumed_tail
            if not chunk and not pending:
                break  # input used up before the end-of-stream marker: truncated
        if not inflater.eof:
            raise zlib.error("compressed data ended before the end-of-stream marker")
        rest = inflater.unused_data.lstrip(b"\x00")  # gzip pads members with zeros
        if rest and not rest.startswith(GZIP_MAGIC):
            raise zlib.error("trailing garbage after the gzip data")
    return bytes(out)


def _decode(data: bytes, where: str) -> str:
    """Text of a report file's bytes; gzip data (magic ``1f 8b``) is decompressed first,
    whatever the file is called, and never past the size cap."""
    if data.startswith(GZIP_MAGIC):
        try:
            data = _gunzip(data, where)
        except (OSError, EOFError, zlib.error) as error:  # BadGzipFile is an OSError
            raise ValueError(
                f"{where}: not a torchscan_stages report (damaged gzip data: {error})"
            ) from None
    limit = report_byte_limit()
    if len(data) > limit:
        raise _too_large(where, f"{len(data)} bytes of text", limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{where}: not a torchscan_stages report (not UTF-8 text: byte {error.start} "
            f"is {data[error.start : error.start + 1]!r})"
        ) from None


def _read_file(path: Path, where: str) -> str:
    try:
        if path.is_dir():
            raise ValueError(f"load_report: {where!r} is a directory, not a report file")
        if not path.is_file():
            raise ValueError(f"load_report: no report file at {where!r}")
        limit = report_byte_limit()
        size = path.stat().st_size
        if size > limit:  # refused before a byte is read
            raise _too_large(where, f"the file's {size} bytes", limit)
        data = path.read_bytes()
    except OSError as error:  # unreadable, or a name too long for the file system
        raise ValueError(f"load_report: cannot read {where[:200]!r}: {error.strerror}") from None
    return _decode(data, where)


def _read_source(path_or_text: str | os.PathLike[str] | bytes) -> tuple[str, str]:
    """Return (text, where) for a path or a JSON text."""
    if isinstance(path_or_text, bytes):
        return _decode(path_or_text, "<bytes>"), "<bytes>"
    if isinstance(path_or_text, os.PathLike):
        path = Path(path_or_text)
        return _read_file(path, str(path)), str(path)
    if not isinstance(path_or_text, str):
        raise TypeError(
            f"load_report takes a path, JSON text or bytes, got {type(path_or_text).__name__}"
        )
    text = path_or_text
    if text.lstrip().startswith(("{", "[")):
        if len(text) > report_byte_limit():
            raise _too_large("<text>", f"{len(text)} characters", report_byte_limit())
        return text, "<text>"
    if "\x00" in text:
        raise ValueError("load_report: the argument is neither a JSON document nor a file path")
    try:
        exists = Path(text).exists()
    except OSError:  # e.g. a name too long to be a path: it is not a file either
        exists = False
    if not exists:
        shown = text if len(text) <= 200 else text[:200] + "..."
        raise ValueError(f"load_report: {shown!r} is neither a JSON document nor an existing file")
    return _read_file(Path(text), text), text


_TOO_MANY_DIGITS = re.compile(r"value has (\d+) digits")
# a JSON escape of a UTF-16 surrogate: a lone one decodes to a str no file can hold
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _parse(text: str, where: str) -> Any:
    """The JSON document of ``text``; one-line ValueErrors for what json refuses or lets by
    (an integer past Python's digit limit, a lone UTF-16 surrogate in a string)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: malformed JSON ({error})") from None
    except RecursionError:
        raise ValueError(f"{where}: JSON nested too deeply to be a report") from None
    except ValueError as error:  # int(): "Exceeds the limit (4300 digits) ... has N digits"
        found = _TOO_MANY_DIGITS.search(str(error))
        digits = f" ({found.group(1)} digits)" if found else ""
        raise ValueError(f"{where}: integer too long{digits}") from None
    if _SURROGATE_ESCAPE.search(text) or _SURROGATE.search(text):
        field = _surrogate_field(document, "")
        if field is not None:
            raise ValueError(
                f"{where}: invalid text at {field}: a lone UTF-16 surrogate (no character; "
                "the file was damaged or edited)"
            )
    return document


def _surrogate_field(value: Any, at: str) -> str | None:
    """The dotted path of the first key or string holding a lone surrogate (None: none)."""
    stack: list[tuple[Any, str]] = [(value, at)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return path or "(top level)"
        elif isinstance(item, dict):
            for key, inner in reversed(item.items()):
                where = f"{path}.{key}" if path else str(key)
                if _SURROGATE.search(key):
                    return f"{path + '.' if path else ''}{key!a} (a key)"
                stack.append((inner, where))
        elif isinstance(item, list):
            stack.extend((inner, f"{path}.{i}") for i, inner in reversed(list(enumerate(item))))
    return None


def _umask() -> int:
    """The process umask: from /proc on Linux (no global change), else by setting it back."""
    with (
        contextlib.suppress(OSError, ValueError),
        open("/proc/self/status", encoding="ascii") as handle,
    ):
        for line in handle:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_TMP_RANDOM_CHARS = 8  # tempfile's random part of a name
# a report write takes milliseconds; a temporary this much older than a new write of the same
# file belongs to a write that was killed, not to one still running
STALE_TMP_AGE_S = 60.0


def clean_stale_temporaries(target: Path, started: float, own: str) -> None:
    """Remove ``.NAME.XXXX.tmp`` files of ``target`` that a killed write left behind.

    Only exact matches of this target's pattern (``mkstemp``'s 8 random characters) last
    modified ``STALE_TMP_AGE_S`` before this write began: a concurrent write is newer.
    """
    prefix, suffix = f".{target.name}.", ".tmp"
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return
    for entry in entries:
        name = entry.name
        middle = name[len(prefix) : -len(suffix)]
        if (
            name == own
            or not (name.startswith(prefix) and name.endswith(suffix))
            or len(middle) != _TMP_RANDOM_CHARS
            or not middle.replace("_", "a").isalnum()
        ):
            continue
        with contextlib.suppress(OSError):
            stale = entry.stat(follow_symlinks=False).st_mtime < started - STALE_TMP_AGE_S
            if stale and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)


def atomic_write_text(path: str | os.PathLike[str], text: str | bytes) -> Path:
    """Write text (or bytes) to ``path`` via a temporary file beside it and an atomic rename.

    An interrupted write leaves the previous file (or none), never a truncated one; the
    temporary files of earlier writes killed before their rename are removed here. The file
    gets the permissions of any new file under the process umask (0644 under umask 022).
    """
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file to write", str(target))
    if target.parent.exists() and not target.parent.is_dir():  # mkdir would say "File exists"
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory", str(target.parent))
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    # SIGTERM/SIGHUP (default action) become an exception here, so the temporary goes before
    # the process dies of the signal, sent again once the write has unwound
    with ending_signals_raise(redeliver=True):
        tmp_name = write_temporary(target, text)
        try:
            os.replace(tmp_name, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
            raise
    clean_stale_temporaries(target, started, os.path.basename(tmp_name))
    return target


def write_temporary(target: Path, text: str | bytes) -> str:
    """Write ``text`` (UTF-8 when a str) to a new ``.NAME.XXXXXXXX.tmp`` beside ``target``,
    synced; its path.

    The caller renames it over ``target``. On any failure the temporary is removed. Also
    the first phase of the pipeline runner's all-or-nothing write of a stage's outputs.
    """
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp creates 0600; honour the umask instead
        data = text.encode("utf-8") if isinstance(text, str) else text
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    return tmp_name


def _same_file(source: object, target: Path) -> bool:
    """Whether ``source`` (a report model, JSON text or a path) names the file ``target``."""
    if isinstance(source, bytes) or not isinstance(source, (str, os.PathLike)):
        return False
    if isinstance(source, str) and source.lstrip().startswith(("{", "[")):
        return False  # JSON text, not a path
    try:
        return Path(source).exists() and os.path.samefile(source, target)
    except (OSError, ValueError):
        return False


def check_output_path(
    output: str | os.PathLike[str] | None, sources: Sequence[object], *, example: str = "out"
) -> None:
    """Refuse an output that is a directory or one of the inputs, before any work is done.

    For every command and function that reads reports and writes a file: writing over an
    input would destroy the report the output was made from. ``sources`` may mix paths,
    JSON text and report models (only paths can clash).
    """
    if output is None:
        return
    target = Path(output)
    if target.is_dir():
        raise ValueError(
            f"output {str(target)!r} is a directory; name the file to write, "
            f"such as {str(target / example)!r}"
        )
    if not target.exists():
        return
    for source in sources:
        if _same_file(source, target):
            raise ValueError(
                f"output {str(target)!r} is one of the input reports; refusing to overwrite it "
                "(choose another output file)"
            )


# what a path itself can be wrong with (a full disk or an I/O error stays an OSError)
_PATH_ERRORS = frozenset(
    {errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM, errno.EROFS}
    | {errno.ENAMETOOLONG, errno.ELOOP, errno.EEXIST, errno.EINVAL}
)


class OutputPathError(OSError, ValueError):
    """An output file that cannot be written: a ``ValueError`` (a bad argument) that is also
    the ``OSError`` it was, so callers catching either get one line naming the path."""

    def __init__(self, code: int | None, why: str, path: str) -> None:
        super().__init__(code, why, path)
        shown = path if path.isprintable() else repr(path)
        self.message = f"cannot write {shown}: {why}"

    def __str__(self) -> str:
        return self.message


def write_output(path: str | os.PathLike[str], text: str | bytes) -> Path:
    """:func:`atomic_write_text` for a file a user named: a path that cannot be written (a
    directory, a folder under a file, ``/proc``, no permission) is one
    :class:`OutputPathError` naming it, never a temporary file's ``FileNotFoundError``; a
    full disk or an I/O error is the ``OSError`` it was."""
    if isinstance(text, str) and _SURROGATE.search(text):  # UTF-8 cannot hold it: say where
        at = _SURROGATE.search(text).start()  # type: ignore[union-attr]
        raise ValueError(
            f"cannot write {path}: the text holds a lone UTF-16 surrogate (no character) at "
            f"character {at}, after {text[max(0, at - 40) : at]!a} (a name given to a module "
            "or a key holds it; rename it)"
        )
    try:
        return atomic_write_text(path, text)
    except OSError as error:
        if error.errno not in _PATH_ERRORS:  # a full disk, an I/O error: not the path's fault
            raise
        why = error.strerror or type(error).__name__
        folder = Path(path).parent
        if error.errno == errno.ENOENT and folder.is_dir():  # /proc, a vanished folder
            why = f"its folder {str(folder)!r} does not accept new files ({why})"
        raise OutputPathError(error.errno, why, str(path)) from None


def report_text(report: BaseModel) -> str:
    """The compact JSON text of a report (``report.codec``), as :func:`save_report` writes it."""
    return dump_text(encode_report(report, SCHEMA_VERSION))


def save_report(report: BaseModel, path: str | os.PathLike[str]) -> Path:
    """Write any report atomically in its compact JSON form.

    (Typed on pydantic's ``BaseModel``, not the report base, so that this module and the
    models, whose ``save`` calls it, import each other in one direction only.)

    A name ending in ``.gz`` (``crawl.json.gz``) gets the same text gzip-compressed; any other
    name gets plain JSON text, so ``jq``, diffs and DVC read it as before. ``load_report``
    tells the two apart by content (gzip magic ``1f 8b``), not by name.
    """
    text = report_text(report)
    if str(path).endswith(".gz"):
        # mtime=0: the same report gives the same bytes (DVC and git see no change)
        return write_output(path, gzip.compress(text.encode("utf-8"), mtime=0))
    return write_output(path, text)
