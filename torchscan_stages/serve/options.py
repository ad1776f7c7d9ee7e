"""ServeOptions: every setting of a served run in one frozen, validated object.

One way in per setting: ``measure_served(..., options=ServeOptions(...) | {...})``. Built
objects are validated, so a zero, negative, NaN or absurd rate, duration or bound is refused
before LoadGen or any thread starts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeAlias

from ..settings import settings_from

Scenario: TypeAlias = Literal["single_stream", "server", "offline", "multi_stream"]
SCENARIOS: tuple[str, ...] = ("single_stream", "server", "offline", "multi_stream")

# absurd: a rate no host serves from Python (LoadGen would schedule billions of queries)
MAX_QPS = 1e6
MAX_DURATION_S = 24 * 3600.0
MAX_BATCH = 65_536


def _number(name: str, value: object, *, low: float, high: float, low_open: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"ServeOptions.{name} must be a number, got {type(value).__name__}")
    below = value <= low if low_open else value < low
    if not math.isfinite(value) or below or value > high:
        sign = ">" if low_open else ">="
        raise ValueError(
            f"ServeOptions.{name} must be finite, {sign} {low:g} and <= {high:g}, got {value!r}"
        )
    return float(value)


def _count(name: str, value: object, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"ServeOptions.{name} must be an int in [{low}, {high}], got {value!r}")
    return value


@dataclass(frozen=True)
class ServeOptions:
    """Settings of one served run (seconds, queries per second, counts).

    ``target_qps``: the offered Poisson rate of ``server``, the expected rate of ``offline``
    (LoadGen sizes its one query from it) and of ``multi_stream``'s query period; None uses
    the scenario's own (``server`` needs it). ``duration_s``: LoadGen's minimum duration;
    ``max_duration_s`` stops issuing (None: 4x duration + 2 s). ``min_queries``: LoadGen's
    minimum query count. ``bound_s`` and ``percentile``: the latency bound LoadGen's
    performance constraint and early stopping check (None: no bound asked).
    ``max_batch`` / ``max_wait_s``: the package's server loop gathers up to ``max_batch``
    waiting requests, waiting at most ``max_wait_s`` after the first (1 / 0: no batching;
    a batched handler takes a list and returns a list of the same length). ``workers``:
    handler calls in flight at once. ``request_timeout_s``: a call running longer is
    abandoned and the run fails (a handler that never returns). ``samples_per_query``:
    ``multi_stream``'s query size. ``seed``: LoadGen's schedule and sample RNG seeds.
    """

    target_qps: float | None = None
    duration_s: float = 1.0
    max_duration_s: float | None = None
    min_queries: int = 1
    bound_s: float | None = None
    percentile: float = 99.0
    max_batch: int = 1
    max_wait_s: float = 0.0
    workers: int = 1
    request_timeout_s: float = 30.0
    samples_per_query: int = 8
    seed: int = 0

    def __post_init__(self) -> None:
        if self.target_qps is not None:
            _number("target_qps", self.target_qps, low=0.0, high=MAX_QPS, low_open=True)
        _number("duration_s", self.duration_s, low=0.0, high=MAX_DURATION_S, low_open=True)
        if self.max_duration_s is not None:
            _number(
                "max_duration_s", self.max_duration_s, low=0, high=MAX_DURATION_S, low_open=True
            )
            if self.max_duration_s < self.duration_s:
                raise ValueError(
                    f"ServeOptions.max_duration_s ({self.max_duration_s}) must be >= "
                    f"duration_s ({self.duration_s})"
                )
        _count("min_queries", self.min_queries, low=1, high=10**9)
        if self.bound_s is not None:
            _number("bound_s", self.bound_s, low=0.0, high=MAX_DURATION_S, low_open=True)
        _number("percentile", self.percentile, low=0.0, high=99.999, low_open=True)
        _count("max_batch", self.max_batch, low=1, high=MAX_BATCH)
        _number("max_wait_s", self.max_wait_s, low=0.0, high=MAX_DURATION_S, low_open=False)
        _count("workers", self.workers, low=1, high=1024)
        _number(
            "request_timeout_s", self.request_timeout_s, low=0, high=MAX_DURATION_S, low_open=True
        )
        _count("samples_per_query", self.samples_per_query, low=1, high=MAX_BATCH)
        _count("seed", self.seed, low=0, high=2**63 - 1)

    @classmethod
    def from_mapping(cls, options: ServeOptions | Mapping[str, Any] | None) -> ServeOptions:
        """Options from a mapping of field names (unknown names refused)."""
        return settings_from(cls, options, what="serve options")

    @property
    def stop_after_s(self) -> float:
        """When LoadGen stops issuing (its max duration)."""
        if self.max_duration_s is not None:
            return self.max_duration_s
        return 4.0 * self.duration_s + 2.0

    def settings(self) -> dict[str, Any]:
        """The options as recorded in a report."""
        return asdict(self)


def check_scenario(scenario: object) -> str:
    """The scenario name, or a one-line error listing the known ones."""
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {list(SCENARIOS)}, got {scenario!r}")
    return str(scenario)
