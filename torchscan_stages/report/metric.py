"""The trust-stated number (:class:`MetricResult`) and the diagnostic that travels with it.

The ground of the report package: every other report module builds on these, and they
import nothing from the package.
"""

from __future__ import annotations

import functools
import math
from typing import Annotated, Any, Literal, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, model_validator

SCHEMA_VERSION = 2
# versions load_report reads: 1 is the field-by-field form, 2 adds the compact encoding
READABLE_VERSIONS = (1, 2)
GZIP_MAGIC = b"\x1f\x8b"

Status: TypeAlias = Literal["complete", "partial", "unavailable"]
Severity: TypeAlias = Literal["info", "warning", "error"]
# the text a person sees for each status (printouts, progress lines, the compare gate)
STATUS_MARKERS: dict[Status, str] = {
    "complete": "[ok]",
    "partial": "[>= partial]",
    "unavailable": "[n/a]",
}
Number: TypeAlias = int | float
# report numbers are never coerced: "3" or True is refused, not quietly turned into 3
StrictNumber: TypeAlias = StrictInt | StrictFloat
# counts, sizes and times: never negative, never NaN or infinite
# strict: ``true`` is an int to Python, never a count in a report
NonNegInt: TypeAlias = Annotated[StrictInt, Field(ge=0)]
# integer counts: a float (1e308) is no count of FLOPs, MACs, parameters or elements
INTEGER_UNITS = frozenset({"FLOPs", "MACs", "parameters", "elements"})
EXACT_FLOAT_COUNT = 2**53  # a float count beyond this (1e308) is no exact count of anything
NonNegFloat: TypeAlias = Annotated[float, Field(ge=0, allow_inf_nan=False)]
FiniteFloat: TypeAlias = Annotated[float, Field(allow_inf_nan=False)]
# units whose numbers count or measure something, so a negative one is impossible
# ("input_positions" is not among them: a transposed convolution's padding can be negative)
NON_NEGATIVE_UNITS = frozenset({"FLOPs", "MACs", "elements", "bytes", "parameters", "s"})


class _Model(BaseModel):
    """Base for wire models: unknown fields are refused so typos never pass silently."""

    model_config = ConfigDict(extra="forbid")


class MetricResult(_Model):
    """One number with its trust state.

    | status      | value  | known_value |
    | complete    | number | same number |
    | partial     | null   | number (lower bound) |
    | unavailable | null   | null |
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: Status
    value: StrictNumber | None = None
    known_value: StrictNumber | None = None
    unit: str
    scope: str
    method: str

    @model_validator(mode="after")
    def _check_status(self) -> MetricResult:
        for name in ("value", "known_value"):
            number = getattr(self, name)
            if isinstance(number, float) and not math.isfinite(number):
                raise ValueError(f"MetricResult.{name} must be finite, got {number!r}")
            if (
                isinstance(number, float)
                and self.unit in INTEGER_UNITS
                and not (number.is_integer() and abs(number) <= EXACT_FLOAT_COUNT)
            ):
                raise ValueError(
                    f"MetricResult.{name} must be an integer count for unit {self.unit!r}, "
                    f"got {number!r}"
                )
            if number is not None and number < 0 and _counts_something(self.unit):
                raise ValueError(
                    f"MetricResult.{name} must be >= 0 for unit {self.unit!r} "
                    f"(a count, size or time), got {number!r}"
                )
        if self.status == "complete":
            if self.value is None or self.known_value is None:
                raise ValueError("a complete MetricResult needs both value and known_value")
            if self.value != self.known_value:
                raise ValueError(
                    "a complete MetricResult has value == known_value, "
                    f"got value={self.value!r} known_value={self.known_value!r}"
                )
        elif self.status == "partial":
            if self.value is not None:
                raise ValueError(
                    "a partial MetricResult has value=None (known_value is a lower bound), "
                    f"got value={self.value!r}"
                )
            if self.known_value is None:
                raise ValueError("a partial MetricResult needs known_value (its lower bound)")
        elif self.value is not None or self.known_value is not None:
            raise ValueError("an unavailable MetricResult has value=None and known_value=None")
        return self

    # The constructors below return shared, validated instances (MetricResult is frozen):
    # a crawl of thousands of layers builds the same few results over and over, and pydantic
    # validation per result would dominate its per-layer cost.

    @classmethod
    def complete(cls, value: Number, *, unit: str, scope: str, method: str) -> MetricResult:
        return _shared_metric("complete", value, type(value).__name__, unit, scope, method)

    @classmethod
    def partial(cls, known_value: Number, *, unit: str, scope: str, method: str) -> MetricResult:
        kind = type(known_value).__name__
        return _shared_metric("partial", known_value, kind, unit, scope, method)

    @classmethod
    def unavailable(cls, *, unit: str, scope: str, method: str) -> MetricResult:
        return _shared_metric("unavailable", None, "NoneType", unit, scope, method)

    @property
    def is_complete(self) -> bool:
        return self.status == "complete"


def _counts_something(unit: str) -> bool:
    """Counts, sizes, times and rates of them (``images/s``) are never negative."""
    return unit in NON_NEGATIVE_UNITS or unit.endswith("/s")


@functools.lru_cache(maxsize=1 << 16)
def _shared_metric(
    status: Status, number: Number | None, number_type: str, unit: str, scope: str, method: str
) -> MetricResult:
    """One validated MetricResult per distinct content (``number_type`` keeps 1 and 1.0 apart)."""
    return MetricResult(
        status=status,
        value=number if status == "complete" else None,
        known_value=number,
        unit=unit,
        scope=scope,
        method=method,
    )


_M = TypeVar("_M", bound=BaseModel)


_SLOTS = BaseModel.__dict__
_set_fields_set = _SLOTS["__pydantic_fields_set__"].__set__
_set_extra = _SLOTS["__pydantic_extra__"].__set__
_set_private = _SLOTS["__pydantic_private__"].__set__
# per model class: its field names in order and the one fields-set that every instance built
# here shares (every field is set, so pydantic's add-on-assignment never changes it and
# model_copy copies it); None for a class with a post-init hook (model_construct only)
_LAYOUTS: dict[type[BaseModel], tuple[tuple[str, ...], set[str]] | None] = {}


def _layout(cls: type[BaseModel]) -> tuple[tuple[str, ...], set[str]] | None:
    layout = _LAYOUTS.get(cls, False)
    if layout is False:
        fields = tuple(cls.__pydantic_fields__)
        layout = _LAYOUTS[cls] = None if cls.__pydantic_post_init__ else (fields, set(fields))
    return layout  # type: ignore[return-value]


def trusted_construct(cls: type[_M], values: dict[str, Any], *, in_order: bool = False) -> _M:
    """An instance from values that are already typed and complete: every field given.

    The one way the package builds models without validation. What ``model_construct`` does
    for such values, without its per-field alias and default loop, which dominated the
    per-layer cost of a crawl of thousands of layers. Models with a post-init hook, or values
    that miss or misname a field, go through ``model_construct`` (a test checks both give
    equal instances). ``in_order=True``: the caller built ``values`` complete, in field order
    and for this instance alone (checked once per crawl or per load, not per call), so the
    dict becomes the instance's state as it is. Measured by ``bench_crawl.py --scaffolding``
    (process CPU time, median over rounds, 2 shared cores under load average 12-25): building
    a crawl's records through the checked path instead costs 1.07x-1.12x on 5,000 blocks (three
    runs, 3-7 rounds) and 0.93x-1.04x on the Transformer (within that load's noise).
    """
    layout = _layout(cls)
    if layout is None or (
        not in_order and (len(values) != len(layout[0]) or not values.keys() >= layout[1])
    ):
        return cls.model_construct(**values)
    model = object.__new__(cls)
    # field order, and a dict of its own
    object.__setattr__(model, "__dict__", values if in_order else {n: values[n] for n in layout[0]})
    _set_fields_set(model, layout[1])
    _set_extra(model, None)
    _set_private(model, None)
    return model


def combine_sum(results: list[MetricResult], *, unit: str, scope: str, method: str) -> MetricResult:
    """Add results of one unit/scope/method; incompleteness propagates, never becomes zero.

    An empty list is a complete zero (nothing to count). Any unavailable or partial part makes
    the sum partial with the known parts as its lower bound; all unavailable stays unavailable.
    """
    for result in results:
        if (result.unit, result.scope, result.method) != (unit, scope, method):
            raise ValueError(
                "refusing to add results of different unit/scope/method: "
                f"expected ({unit}, {scope}, {method}), got "
                f"({result.unit}, {result.scope}, {result.method})"
            )
    if not results:
        return MetricResult.complete(0, unit=unit, scope=scope, method=method)
    known = [r.known_value for r in results if r.known_value is not None]
    total: Number = sum(known) if known else 0
    if all(r.status == "complete" for r in results):
        return MetricResult.complete(total, unit=unit, scope=scope, method=method)
    if not known:
        return MetricResult.unavailable(unit=unit, scope=scope, method=method)
    return MetricResult.partial(total, unit=unit, scope=scope, method=method)


class Diagnostic(_Model):
    """Why a number is incomplete or should be read with care; travels with the measurement."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str
    severity: Severity = "warning"
    metric: str | None = None
    message: str
    path: str | None = None
    operator: str | None = None
    count: int | None = None
