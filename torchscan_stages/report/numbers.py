"""How a number reads for people: SI prefixes, binary bytes, time units, exact integers.

The ground floor's formatting, so that a report printed with ``print(report)`` (see
``brief``) and every page and terminal surface in ``render/`` show a number the same way.
Pure functions of a value and its unit; nothing here knows about pages.
"""

from __future__ import annotations

import math

from .metric import STATUS_MARKERS, MetricResult

_SI = ("", "k", "M", "G", "T", "P", "E")
_IEC = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_COUNT_UNITS = frozenset({"FLOPs", "MACs", "DMAs", "FLOP", "MAC", "DMA", "calls"})
DASH = "—"


def _three_digits(x: float) -> str:
    """Three significant digits without exponent notation (x in [0, 1000))."""
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def si(value: float, unit: str = "", *, space: bool = True) -> str:
    """``1234567 -> '1.23 M'``; the prefix moves up when rounding reaches 1000."""
    sign = "-" if value < 0 else ""
    x = abs(float(value))
    if x < 1000:
        text = str(int(x)) if x == int(x) else _three_digits(x)
        return f"{sign}{text}{' ' if space and unit else ''}{unit}"
    index = min(int(math.log10(x) // 3), len(_SI) - 1)
    scaled = x / 1000**index
    text = _three_digits(scaled)
    if float(text) >= 1000 and index + 1 < len(_SI):
        index += 1
        text = _three_digits(x / 1000**index)
    gap = " " if space else ""
    if unit and unit not in _COUNT_UNITS:
        # '1.59 k samples/s', not '1.59 ksamples/s': only counting units take a glued prefix
        return f"{sign}{text}{gap}{_SI[index]} {unit}"
    return f"{sign}{text}{gap}{_SI[index]}{unit}"


def iec_bytes(value: float) -> str:
    """``1572864 -> '1.50 MiB'``: bytes use binary prefixes, as memory tools do."""
    sign = "-" if value < 0 else ""
    x = abs(float(value))
    if x < 1024:
        return f"{sign}{x:.0f} B"
    index = min(int(math.log(x, 1024)), len(_IEC) - 1)
    scaled = x / 1024**index
    text = _three_digits(scaled)
    if float(text) >= 1000 and index + 1 < len(_IEC):
        index += 1
        text = _three_digits(x / 1024**index)
    return f"{sign}{text} {_IEC[index]}"


def seconds(value: float) -> str:
    """``0.001234 -> '1.23 ms'``: the largest unit that keeps the number >= 1."""
    sign = "-" if value < 0 else ""
    x = abs(float(value))
    if x == 0:
        return "0 s"
    for factor, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if x >= factor:
            scaled = x / factor
            if name == "s" and scaled >= 1000:
                return f"{sign}{thousands(round(scaled))} s"
            return f"{sign}{_three_digits(scaled)} {name}"
    return f"{sign}{_three_digits(x / 1e-9)} ns"


def thousands(value: float) -> str:
    """Exact integers with separators; other floats with up to 6 significant digits."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.6g}"


def human(value: float, unit: str) -> str:
    """The display form of ``value`` in ``unit``."""
    if unit == "bytes":
        return iec_bytes(value)
    if unit == "s":
        return seconds(value)
    if unit in _COUNT_UNITS:
        return si(value, unit)
    if unit.endswith("/s"):
        return si(value, unit)
    if unit in ("parameters", "elements", "count", ""):
        return thousands(value)
    return f"{thousands(value)} {unit}"


def metric_text(result: MetricResult | None) -> str:
    """``'9.04 ms'``, ``'≥ 4.19 MiB (lower bound)'`` or ``'— (unavailable)'``."""
    if result is None:
        return f"{DASH} (not measured)"
    if result.status == "complete" and result.value is not None:
        return human(result.value, result.unit)
    if result.status == "partial" and result.known_value is not None:
        return f"≥ {human(result.known_value, result.unit)} (lower bound)"
    return f"{DASH} (unavailable)"


def metric_line(label: str, result: MetricResult, extra: str = "") -> str:
    """One printout line: status marker, label, value, then ``[scope; method]``."""
    tail = f"  {extra}" if extra else ""
    return (
        f"  {STATUS_MARKERS[result.status]:<13}{label + ' ':<28}{metric_text(result)}"
        f"  [{result.scope}; {result.method}]{tail}"
    )
