"""LatencyOptions: every timing setting of measure_latency, compare_benchmarks and
measure_workload in one frozen, validated object, with its defaults defined once.

Why one object: the same ten settings used to be threaded by hand through four functions
(and rebuilt with ``inspect.signature``), and two modules disagreed on the warm-up default.
An options object is validated when it is built, so a bad value is refused before any
workload runs, wherever it came from.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, ParamSpec, TypeVar

from ..settings import settings_from

Clock = Callable[[], float]
Probe = Callable[[], tuple[float, int]]
"""Returns (process CPU seconds, involuntary context switches so far); see measure.host."""

MAX_CALLS_PER_BLOCK = 10_000_000


@dataclass(frozen=True)
class LatencyOptions:
    """Timing settings (seconds, counts, ratios); validated on construction.

    ``warmup``: seconds of calls after the first call, not recorded. ``min_run_time`` /
    ``max_run_time``: bounds of the measured blocks (``max_run_time`` is the time budget).
    ``min_block_time``: shortest block (blocks are also >= 1000 timer resolutions and 1000
    empty timed regions). ``min_blocks``: fewest blocks before any stop. ``target_relative_iqr``
    and ``target_median_precision``: measure_latency stops once IQR/median is at most the
    first and the 95% interval of the median is within ± the second (relative); a short
    sample of stable blocks still moves between runs, so its median must also be pinned
    down. ``noise_threshold``: IQR/median
    above this gets a ``latency_noisy`` warning. ``clock``: replaces time.perf_counter (tests);
    host state is then not recorded (an injected clock simulates the machine). ``probe``:
    replaces the per-block probe of CPU time and involuntary switches (tests).
    """

    warmup: float = 0.1
    min_run_time: float = 0.05
    max_run_time: float = 5.0
    min_block_time: float = 0.001
    min_blocks: int = 7
    target_relative_iqr: float = 0.02
    target_median_precision: float = 0.005
    noise_threshold: float = 0.05
    clock: Clock | None = None
    probe: Probe | None = None

    def __post_init__(self) -> None:
        lowest = {
            "warmup": 0.0,
            "min_run_time": 1e-9,
            "max_run_time": 1e-9,
            "min_block_time": 0.0,
            "target_relative_iqr": 0.0,
            "target_median_precision": 0.0,
            "noise_threshold": 0.0,
        }
        for name, floor in lowest.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(
                    f"{name} must be a number of seconds/ratio, got {type(value).__name__}"
                )
            if not math.isfinite(value) or value < floor:
                raise ValueError(f"{name} must be finite and >= {floor}, got {value!r}")
        if self.max_run_time < self.min_run_time:
            raise ValueError(
                f"max_run_time ({self.max_run_time}) must be >= min_run_time ({self.min_run_time})"
            )
        blocks = self.min_blocks
        if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 1:
            raise ValueError(f"min_blocks must be an int >= 1, got {blocks!r}")
        for name in ("clock", "probe"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(f"{name} must be a zero-argument callable, got {value!r}")

    @classmethod
    def from_mapping(
        cls,
        options: Mapping[str, Any] | LatencyOptions | None,
        *,
        base: LatencyOptions | None = None,
    ) -> LatencyOptions:
        """Options from a mapping of field names (unknown names refused) over ``base``."""
        return settings_from(cls, options, what="latency options", base=base)

    def settings(self) -> dict[str, Any]:
        """The options as recorded in a report (seconds suffixed ``_s``; no clock object)."""
        data = asdict(self)
        data.pop("clock")
        data.pop("probe")
        renamed = {"warmup": "warmup_s", "min_run_time": "min_run_time_s"}
        renamed |= {"max_run_time": "max_run_time_s", "min_block_time": "min_block_time_s"}
        return {renamed.get(key, key): value for key, value in data.items()}

    @property
    def timer(self) -> str:
        return "injected clock" if self.clock is not None else "time.perf_counter"

    @property
    def backstop_s(self) -> float:
        """Real seconds (time.monotonic) after which a timing stops whatever its clock says:
        a clock that does not advance must not hang the caller."""
        return 2.0 * (self.warmup + self.max_run_time) + 1.0


# One place for the defaults. A comparison measures longer than a single latency pass: its
# interval must become narrower than the minimum effect, so its time budget is larger (the
# rounds it needs before a verdict are its Judge's min_blocks). Everything else is shared.
MEASURE_DEFAULTS = LatencyOptions()
COMPARE_DEFAULTS = LatencyOptions(min_run_time=0.5, max_run_time=8.0)


def validate_work(work_units: object, unit: object) -> None:
    """``work_units`` (work one call completes) and its ``unit``, as every timing uses them."""
    if isinstance(work_units, bool) or not isinstance(work_units, (int, float)):
        raise TypeError(f"work_units must be a number, got {type(work_units).__name__}")
    if not math.isfinite(work_units) or work_units <= 0:
        raise ValueError(f"work_units must be a finite number > 0, got {work_units!r}")
    if not isinstance(unit, str) or not unit.strip():
        raise ValueError(f"unit must be a non-empty string such as 'samples', got {unit!r}")


_P = ParamSpec("_P")
_R = TypeVar("_R")


def moved_into_options(
    *, renamed: Mapping[str, str] | None = None, **homes: Any
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """For one release: a former flat keyword of a setting that now lives in an options
    object gets a TypeError naming its new spelling, not Python's bare "unexpected keyword".

    ``homes`` maps each options keyword of the function to its dataclass
    (``options=LatencyOptions``, ``judge=Judge``); a field is looked up in the order given,
    so a setting two objects hold is named in the first. ``renamed`` maps a former synonym
    of an options keyword to it (``{"latency_options": "options"}``).
    """
    moved: dict[str, tuple[str, str]] = {}
    for keyword, kind in homes.items():
        for name in (f.name for f in fields(kind)):
            moved.setdefault(name, (keyword, kind.__name__))
    synonyms = dict(renamed or {})

    def wrap(function: Callable[_P, _R]) -> Callable[_P, _R]:
        own = set(inspect.signature(function).parameters)
        clash = sorted(own & (set(moved) | set(synonyms)))
        if clash:  # a keyword of its own would be refused as moved
            raise TypeError(f"{function.__name__} has its own keyword(s) {clash}")

        @functools.wraps(function)
        def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            old = sorted(set(kwargs) & set(synonyms))
            if old:
                raise TypeError(
                    f"{function.__name__}({old[0]}=...) is now {synonyms[old[0]]}=: pass the "
                    f"same object or mapping as {synonyms[old[0]]}=..."
                )
            flat = sorted(set(kwargs) & set(moved))
            if flat:
                first = flat[0]
                keyword, kind = moved[first]
                raise TypeError(
                    f"{function.__name__}({first}=...) moved into {keyword}=: pass "
                    f"{keyword}={{{first!r}: ...}} or {keyword}={kind}({first}=...)"
                )
            return function(*args, **kwargs)

        return call

    return wrap
