"""One committed metrics file (or its evidence sidecar), read without trusting it.

A past commit's ``metrics/<stage>.json`` may hold anything: damaged JSON, a list, ``NaN``,
``Infinity``, a 5,000-digit integer, a negative byte count, a nesting thousands deep, two
million keys. Each is answered here, per file or per key, with a note naming the file and
the commit, so that one bad value makes one point ``unavailable`` and never fails the
history or another metric. Files over the size cap are never read (git tells their size
first); ``TORCHSCAN_STAGES_MAX_METRICS_MB`` or ``history --max-file-mb`` raises it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..report.evidence import MetricEvidence, MetricsEvidence

MIB = 2**20
# the pipeline's metrics files are a few hundred bytes; a dvc.lock of a large pipeline tens
# of kilobytes: 4 MiB is far above both and keeps a hostile file from filling memory
DEFAULT_MAX_FILE_BYTES = 4 * MIB
MAX_FILE_ENV = "TORCHSCAN_STAGES_MAX_METRICS_MB"
MAX_KEYS = 1000  # metrics per file: the pipeline writes about 20 (each is a series)
MAX_INT_DIGITS = 300  # beyond a float's range: no count or time is that large
EVIDENCE_SUFFIX = ".evidence.json"
_OWNER_SUFFIXES = ("_budget", "_within_budget")  # the owner's settings, not measurements
_NON_NEGATIVE_UNITS = ("s", "B", "/s", "FLOPs")


def file_byte_limit(override_mb: float | None = None) -> int:
    """The per-file cap: ``override_mb``, else ``TORCHSCAN_STAGES_MAX_METRICS_MB``, else 4 MiB."""
    if override_mb is not None:
        if not (math.isfinite(override_mb) and override_mb > 0):
            raise ValueError(f"the metrics file size cap must be > 0 MiB, got {override_mb!r}")
        return int(override_mb * MIB)
    text = os.environ.get(MAX_FILE_ENV, "").strip()
    if text.replace(".", "", 1).isdigit() and float(text) > 0:
        return int(float(text) * MIB)
    return DEFAULT_MAX_FILE_BYTES


def too_large(size: int, limit: int) -> str:
    """Why a file was not read (its size came from git, not from reading it)."""
    return (
        f"not read: {size} bytes, over the {limit / MIB:g} MiB cap on a metrics file "
        f"(raise it with {MAX_FILE_ENV}=N or --max-file-mb N if you trust the file)"
    )


def unit_of(name: str) -> str:
    """The unit a flat metric name states by its suffix (the pipeline's naming)."""
    for suffix, unit in (("_per_s", "/s"), ("_bytes", "B"), ("_s", "s"), ("flops", "FLOPs")):
        if name.endswith(suffix):
            return unit
    return ""


def non_negative(name: str) -> bool:
    """Counts, sizes, times, rates and ratios are never negative; ``diff_*`` deltas may be."""
    if name.startswith("diff_"):
        return False
    return unit_of(name) in _NON_NEGATIVE_UNITS or name.endswith(("_ratio", "parameters"))


class _Odd:
    """A JSON number that is not a finite number of ours (kept to name it, never used)."""

    def __init__(self, text: str) -> None:
        self.text = text


def _int(text: str) -> int | _Odd:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        return _Odd(f"a {len(text.lstrip('-'))}-digit integer")
    return int(text)


def _float(text: str) -> float | _Odd:
    value = float(text)
    return value if math.isfinite(value) else _Odd(f"{text} (beyond a float)")


def load_json(data: bytes) -> Any:
    """Strict JSON of untrusted bytes: ValueError (one line) for anything else.

    ``NaN``/``Infinity`` and integers too long to be ours come back as markers, so that one
    such value spoils its key only.
    """
    try:
        text = data.decode("utf-8")
        return json.loads(
            text, parse_constant=_Odd, parse_int=_int, parse_float=_float,
        )  # fmt: skip
    except UnicodeDecodeError as error:
        raise ValueError(f"not UTF-8 text (byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"malformed JSON ({error})") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except ValueError as error:  # int() past Python's digit limit, in a nested value
        raise ValueError(f"unreadable number ({error})") from None


def _shown(value: Any) -> str:
    """A JSON value as a few words: ``true``, ``null``, ``a str ("fast")``, ``a list``."""
    if isinstance(value, _Odd):
        return value.text
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, dict | list):
        return f"a {'list' if isinstance(value, list) else 'dict'} of {len(value)}"
    return f"a {type(value).__name__} ({json.dumps(value)[:40]})"


def _describe(value: Any) -> str:
    if isinstance(value, _Odd):
        return f"{value.text} is not a finite number"
    return f"{_shown(value)}, not a number"


@dataclass(slots=True)
class MetricsFile:
    """What one metrics file says: good numbers, keys with a bad value and why, or a
    reason the whole file is unreadable (then every key of the file is unavailable)."""

    numbers: dict[str, float] = field(default_factory=dict)
    bad: dict[str, str] = field(default_factory=dict)  # key -> why its value is refused
    error: str | None = None
    numeric: set[str] = field(default_factory=set)  # refused keys that were numbers

    @property
    def series_names(self) -> list[str]:
        """Keys that make a series: numbers, and numbers refused (NaN, negative, huge);
        a string or a list is not a metric of ours and makes none."""
        return [*self.numbers, *sorted(self.numeric)]


def parse_metrics(data: bytes) -> MetricsFile:
    """The numbers of one flat metrics file; per-key refusals in ``bad``."""
    try:
        document = load_json(data)
    except ValueError as error:
        return MetricsFile(error=str(error))
    if not isinstance(document, dict):
        return MetricsFile(error=f"the top level is {_shown(document)}, not an object")
    if len(document) > MAX_KEYS:
        return MetricsFile(error=f"{len(document)} keys, over the limit of {MAX_KEYS} per file")
    out = MetricsFile()
    for key, value in document.items():
        name = str(key)
        if name.endswith(_OWNER_SUFFIXES):
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
            if non_negative(name) and number < 0:
                out.bad[name] = f"{value!r} is negative (a count, size, time or ratio is not)"
                out.numeric.add(name)
            else:
                out.numbers[name] = number
        else:
            out.bad[name] = _describe(value)
            if isinstance(value, _Odd):
                out.numeric.add(name)
    return out


NOT_RECORDED = "evidence_not_recorded"
UNREADABLE = "evidence_unreadable"


@dataclass(slots=True)
class Evidence:
    """One commit's sidecar for a stage: its entries by key, or why there are none
    (``error`` None and no entries: the commit has no sidecar)."""

    entries: dict[str, MetricEvidence] | None
    error: str | None = None


def parse_evidence(data: bytes | None) -> Evidence:
    """The sidecar ``metrics/<stage>.evidence.json`` (``data`` None: the commit has none)."""
    if data is None:
        return Evidence(None)
    try:
        document = load_json(data)
        if isinstance(document, dict) and document.get("kind") != "metrics_evidence":
            raise ValueError(f"kind is {document.get('kind')!r}, not 'metrics_evidence'")
        sidecar = MetricsEvidence.model_validate(document)
    except ValueError as error:  # ValidationError is a ValueError
        return Evidence(None, _first_error(error) if isinstance(error, ValidationError)
                        else str(error))  # fmt: skip
    return Evidence(dict(sidecar.metrics))


def _first_error(error: ValidationError) -> str:
    first = error.errors(include_url=False)[0]
    location = ".".join(str(part) for part in first["loc"]) or "(top level)"
    return f"{location}: {first['msg']}"


__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "EVIDENCE_SUFFIX",
    "MAX_FILE_ENV",
    "MAX_KEYS",
    "NOT_RECORDED",
    "UNREADABLE",
    "Evidence",
    "MetricsFile",
    "file_byte_limit",
    "load_json",
    "non_negative",
    "parse_evidence",
    "parse_metrics",
    "too_large",
    "unit_of",
]
