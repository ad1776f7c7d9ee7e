"""Import a user's factory from a dotted name: one resolver for the CLI and the pipeline.

Both spellings are accepted, ``pkg.module:factory`` (entry-point style, the attribute may be
dotted: ``pkg.module:Class.build``) and ``pkg.module.factory`` (Hydra's ``_target_``
style), so a name that works in one place works in the other. Failures are a
``ValueError`` whose message is the reason only; the caller prefixes the option or config
key it came from.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

FORMS = "'pkg.module:factory' or 'pkg.module.factory'"


def _split(spec: str) -> tuple[str, str]:
    if ":" in spec:
        module_name, _, attribute = spec.partition(":")
    else:
        module_name, _, attribute = spec.rpartition(".")
    if not module_name or not attribute:
        raise ValueError(f"expected an importable {FORMS}")
    return module_name, attribute


def import_target(spec: str) -> Callable[..., Any]:
    """The callable ``spec`` names; ``ValueError`` saying what failed (import, name, type)."""
    module_name, attribute = _split(spec)
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # ImportError, or the module raising while importing
        raise ValueError(
            f"cannot import {module_name!r} ({type(error).__name__}: {error})"
        ) from error
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ValueError(f"module {module_name!r} has no {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"{attribute!r} in module {module_name!r} is not callable")
    return target  # type: ignore[no-any-return]
