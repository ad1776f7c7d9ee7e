"""Settings objects (frozen dataclasses) given as built or as a mapping of their fields.

Every ``options=``/``judge=``/``search=`` keyword takes either form; one function reads the
mapping so that an unknown key is refused the same way everywhere, naming the key and the
allowed ones (a typo must never become a silently ignored setting).

Never: defaults of its own, or a key renamed on the way (the dataclass is the contract).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any, TypeVar

T = TypeVar("T")


def settings_from(
    cls: type[T], given: T | Mapping[str, Any] | None, *, what: str, base: T | None = None
) -> T:
    """``given`` as an instance of the dataclass ``cls``: None gives ``base`` (or the
    defaults), an instance is kept as it is, a mapping of field names replaces ``base``'s."""
    start = base if base is not None else cls()
    if given is None:
        return start
    if isinstance(given, cls):
        return given
    if not isinstance(given, Mapping):
        raise TypeError(f"{what} must be a {cls.__name__} or a mapping, got {given!r}")
    allowed = sorted(f.name for f in fields(cls))  # type: ignore[arg-type]
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ValueError(f"{what} has unknown key(s) {unknown}; allowed: {allowed}")
    return replace(start, **dict(given))  # type: ignore[type-var]
