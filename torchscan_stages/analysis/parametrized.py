"""torch parametrisations (``nn.utils.parametrize``): one record per parametrised module.

``weight_norm(conv)`` turns ``conv.weight`` into a property that calls
``conv.parametrizations.weight`` (a ``ParametrizationList`` running ``_WeightNorm``) every
time the weight is read. Those calls are part of the parametrised module's forward, not
layers of the model: the crawl records none of them (their operators are the parametrised
module's own), counts their ``original*`` tensors as the module's own parameters, and adds
the parametrisation's cost to the module's formula. ``_WeightNorm`` has a formula; any
other parametrisation (orthogonal, spectral norm, a user's) makes the module's FLOPs and
MACs a lower bound with a diagnostic naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.nn.utils.parametrize import ParametrizationList

from ..report import Diagnostic, MetricResult
from .handlers import METHOD, METRIC_UNITS, SCOPE


def parametrization_lists(module: nn.Module) -> list[ParametrizationList]:
    """The module's ``ParametrizationList``s (empty when it is not parametrised)."""
    modules = module._modules  # a ScriptModule's is an OrderedModuleDict: no .get
    if "parametrizations" not in modules:
        return []
    holder = modules["parametrizations"]
    if holder is None:
        return []
    return [p for p in holder._modules.values() if isinstance(p, ParametrizationList)]


def inside_parametrizations(named: list[tuple[str, nn.Module]]) -> set[int]:
    """ids of the modules that implement a parametrisation (the ``parametrizations``
    ModuleDicts, their lists and everything under them): the crawl records none of them."""
    hidden: set[int] = set()
    prefixes: list[str] = []
    for path, sub in named:
        if any(path.startswith(prefix) for prefix in prefixes):
            hidden.add(id(sub))
            continue
        if parametrization_lists(sub):
            holder = sub._modules["parametrizations"]
            hidden.add(id(holder))
            prefixes.append((f"{path}." if path else "") + "parametrizations.")
    return hidden


def weight_norm_cost(original0: torch.Tensor, original1: torch.Tensor) -> tuple[int, int]:
    """(FLOPs, DMAs) of ``_WeightNorm``: ``w = g * v / ||v||`` per output slice.

    v (``original1``) has n elements in s slices (g, ``original0``, has s): squares and their
    sums 2n (the norm convention's sum of squares), s square roots, s divisions g / ||v||,
    n multiplies -> 3n + 2s FLOPs, no MACs (a weight-only scale). DMAs: v and g read, w
    written, and w read by the layer (layer formulas read only registered parameters, and
    w is not one): 3n + s.
    """
    n, s = original1.numel(), original0.numel()
    return 3 * n + 2 * s, 3 * n + s


def parametrization_cost(module: nn.Module) -> tuple[int, int, list[str]]:
    """(FLOPs, DMAs, names of parametrisations without a formula) over all parametrised
    tensors of ``module``; each parametrisation runs once per read of its tensor, taken as
    one read per call (what the layer formulas of nn assume)."""
    flops = dmas = 0
    unknown: list[str] = []
    for plist in parametrization_lists(module):
        steps = list(plist._modules.values())
        original0 = getattr(plist, "original0", None)
        original1 = getattr(plist, "original1", None)
        is_weight_norm = len(steps) == 1 and type(steps[0]).__name__ == "_WeightNorm"
        if is_weight_norm and original0 is not None and original1 is not None:
            more_flops, more_dmas = weight_norm_cost(original0, original1)
            flops, dmas = flops + more_flops, dmas + more_dmas
        else:
            unknown.extend(type(step).__name__ for step in steps)
    return flops, dmas, unknown


def with_parametrizations(result: Any, module: nn.Module, path: str) -> Any:
    """A handler's result with the module's parametrisation cost added (unchanged when the
    module is not parametrised or the result is not a mapping of counts)."""
    if not parametrization_lists(module) or not isinstance(result, Mapping):
        return result
    flops, dmas, unknown = parametrization_cost(module)
    out = dict(result)
    for name, extra in (("module_flops", flops), ("dmas", dmas)):
        value = out.get(name)
        if type(value) is int:
            out[name] = value + extra
    if unknown:
        where = path or "<root>"
        for name in ("module_flops", "macs"):
            value = out.get(name)
            if type(value) is int:
                out[name] = MetricResult.partial(
                    value, unit=METRIC_UNITS[name], scope=SCOPE, method=METHOD
                )
        notes = list(out.get("diagnostics") or [])
        notes.append(
            Diagnostic(
                code="parametrization_uncounted",
                metric="module_flops,macs",
                path=path,
                message=f"{type(module).__name__} at {where} is parametrised by "
                f"{', '.join(sorted(set(unknown)))}, which has no formula: its module FLOPs "
                "and MACs are a lower bound (its operators are still counted under it)",
            )
        )
        out["diagnostics"] = notes
    return out
