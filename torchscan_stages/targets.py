"""Import a user's factory from a dotted name: one resolver for the CLI and the pipeline.

Both spellings are accepted, ``pkg.module:factory`` (entry-point style, the attribute may be
dotted: ``pkg.module:Class.build``) and ``pkg.module.factory`` (Hydra's ``_target_``
style), so a name that works in one place works in the other. Failures are a
``ValueError`` whose message is the reason only; the caller prefixes the option or config
key it came from.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
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
        if not hasattr(target, part) and inspect.ismodule(target):
            target = _submodule(target, part)
        if not hasattr(target, part):
            raise ValueError(f"module {module_name!r} has no {attribute!r}")
        target = getattr(target, part)
    if inspect.ismodule(target):
        raise ValueError(
            f"{target.__name__!r} is a module, not a callable; name a factory in it, such as "
            f"'{target.__name__}.FACTORY'"
        )
    if not callable(target):
        raise ValueError(f"{attribute!r} in module {module_name!r} is not callable")
    return target  # type: ignore[no-any-return]


def _submodule(package: Any, part: str) -> Any:
    """``package`` after importing its submodule ``part`` when there is one (a package's
    ``__init__`` need not import its submodules); unchanged when there is none."""
    name = f"{package.__name__}.{part}"
    if not hasattr(package, "__path__") or importlib.util.find_spec(name) is None:
        return package
    try:
        importlib.import_module(name)
    except Exception as error:
        raise ValueError(f"cannot import {name!r} ({type(error).__name__}: {error})") from error
    return package
