"""``named_modules()`` as one loop instead of a generator per module.

``nn.Module.named_modules`` recurses through one generator frame per module and re-yields
every name up the chain (quadratic in depth); a crawl walks the tree once before every
forward, so the walk is part of its fixed cost. The loop gives the same (path, module) pairs
in the same order, each module once under its first path. A type that overrides
``named_modules``, ``__hash__`` or ``__eq__`` (which the real walk's memo set uses) makes it
fall back to ``module.named_modules()`` itself.
"""

from __future__ import annotations

from torch import nn

_NAMED_MODULES = nn.Module.named_modules
_PLAIN: dict[type[nn.Module], bool] = {}


def _plain(cls: type[nn.Module]) -> bool:
    ok = _PLAIN.get(cls)
    if ok is None:
        ok = _PLAIN[cls] = (
            cls.named_modules is _NAMED_MODULES
            and cls.__hash__ is nn.Module.__hash__
            and cls.__eq__ is nn.Module.__eq__
        )
    return ok


def named_modules(module: nn.Module, prefix: str = "") -> list[tuple[str, nn.Module]]:
    """``list(module.named_modules(prefix=prefix))``, built by an explicit pre-order stack."""
    seen: set[int] = set()
    out: list[tuple[str, nn.Module]] = []
    plain = _PLAIN
    stack: list[tuple[str, nn.Module]] = [(prefix, module)]
    while stack:
        path, sub = stack.pop()
        if id(sub) in seen:
            continue
        if not plain.get(type(sub)) and not _plain(type(sub)):
            return list(module.named_modules(prefix=prefix))
        seen.add(id(sub))
        out.append((path, sub))
        children = sub._modules
        if children:
            dot = path + "." if path else ""
            stack.extend(
                [
                    (dot + name, child)
                    for name, child in reversed(children.items())
                    if child is not None
                ]
            )
    return out
