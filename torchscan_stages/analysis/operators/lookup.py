"""Formula lookup: the merged tables (torch's, this package's, a user's custom mapping)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import torch
from torch.utils.flop_counter import flop_registry as _torch_flop_registry
from torch.utils.flop_counter import shape_wrapper as _torch_shape_wrapper

from ..operator_formulas import FORMULAS, PRODUCT_SHARE, RawFormula

OwnerKey: TypeAlias = str
OpKey: TypeAlias = "torch._ops.OpOverloadPacket | torch._ops.OpOverload"

UNIT = "FLOPs"
METHOD = "operator_dispatch"
BASE_CONVENTION = (
    "one multiply-add counts as 2 FLOPs; matmul/conv/attention follow torch.utils.flop_counter's "
    "arithmetic (bias adds inside addmm/convolution are not counted, as in torch) except a "
    "grouped convolution's weight gradient, which torch counts groups times too large"
)

# an Entry's outcome (the three of the package docstring, and one to decompose first)
OUTCOME_COUNTED, OUTCOME_IGNORED, OUTCOME_DECOMPOSE, OUTCOME_UNCOUNTED = 0, 1, 2, 3
# product share of a counted operator: none, the whole count, Flops.products, unknown
SHARE_NONE, SHARE_ALL, SHARE_SPLIT, SHARE_UNKNOWN = 0, 1, 2, 3
_SHARE_CODES = {"none": SHARE_NONE, "all": SHARE_ALL, "split": SHARE_SPLIT}
PRODUCTS_CONVENTION = (
    "product_flops: the tensor-product share only (matmul, convolution, attention's two "
    "batched products, RNN gate products; 2 per multiply-add, bias adds excluded) -- what "
    "torch's FlopCounterMode and fvcore count"
)
# (outcome, formula, packet name, product share, callable that runs the operator)
Entry: TypeAlias = "tuple[int, RawFormula | None, str, int, Callable[..., Any]]"
NAMESPACE_REASONS = {
    "profiler": "profiler annotation: no tensor arithmetic",
    "prim": "view or metadata: no values are read or computed",
}


# ------------------------------------------------------------------------ custom mapping


def classify_custom_mapping(custom_mapping: Any) -> dict[OpKey, Callable[..., int]]:
    """Validate ``{torch.ops.ns.op[.overload]: formula}``; TypeError naming a bad key or value.

    Returns a new dict (the caller's mapping is never kept). ``None`` means no overrides.
    """
    if custom_mapping is None:
        return {}
    if not isinstance(custom_mapping, Mapping):
        raise TypeError(
            "custom_mapping must be a mapping {torch.ops.aten.OP: formula}, got "
            f"{type(custom_mapping).__name__}"
        )
    checked: dict[OpKey, Callable[..., int]] = {}
    for key, formula in custom_mapping.items():
        if not isinstance(key, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
            raise TypeError(
                f"custom_mapping key {key!r} ({type(key).__name__}) is not an operator: use an "
                "operator packet or overload such as torch.ops.aten.mm or "
                "torch.ops.aten.mm.default"
            )
        if not callable(formula):
            raise TypeError(
                f"custom_mapping[{key}] must be a callable formula(*arg_shapes, out_shape=..., "
                f"**kwargs) -> int, got {type(formula).__name__}"
            )
        checked[key] = formula
    return checked


def _shapes(value: Any) -> Any:
    """Tensors -> shapes, through lists/tuples: what ``shape_wrapper``'s pytree map does for
    operator arguments (which never hold dicts), at a fraction of its cost."""
    if isinstance(value, torch.Tensor):
        return value.shape
    if isinstance(value, torch.Size):
        return value
    if isinstance(value, list):
        return [_shapes(item) for item in value]
    if isinstance(value, tuple):  # plain tuples; structseq outputs become tuples too
        return tuple(_shapes(item) for item in value)
    return value


def _shape_formula(formula: Callable[..., int]) -> RawFormula:
    """Call ``formula(*arg_shapes, out_shape=..., **kwargs)`` (FlopCounterMode's contract)."""

    def shaped(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        shape_kwargs = {key: _shapes(value) for key, value in kwargs.items()} if kwargs else {}
        return formula(*_shapes(args), out_shape=_shapes(out), **shape_kwargs)

    return shaped


def _raw_formula(formula: Callable[..., int]) -> RawFormula:
    """Call a raw formula ``formula(*args, out_val=out, **kwargs)`` on the tensors."""

    def raw(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        return formula(*args, out_val=out, **kwargs)

    return raw


def adapt_user_formula(formula: Callable[..., int]) -> RawFormula:
    """FlopCounterMode's contract: shapes in (``shape_wrapper``), or raw if ``_get_raw``."""
    if getattr(formula, "_get_raw", False):
        return _raw_formula(formula)
    return _shape_formula(formula)


_SHAPE_WRAPPER_CODE = _torch_shape_wrapper(lambda: 0).__code__


def _adapt_torch_formula(formula: Callable[..., int]) -> RawFormula:
    """torch's registry holds ``shape_wrapper``-wrapped formulas (unwrapped here so the cheap
    shape mapping replaces its pytree map) and raw ones (called as they are)."""
    inner = getattr(formula, "__wrapped__", None)
    if inner is not None and getattr(formula, "__code__", None) is _SHAPE_WRAPPER_CODE:
        return _shape_formula(inner)
    return _raw_formula(formula)


# torch's own formulas, as shipped (all tensor products); entries a user registers later with
# torch's register_flop_formula are theirs: they win over this package's and their product
# share is unknown
_TORCH_BUILTIN = frozenset(_torch_flop_registry)


@dataclass(slots=True)
class _Base:
    """The merged tables of one registry state, and the classifications made against them.

    ``entries`` (keyed by ``id(func)``) is shared by every counter without a custom mapping:
    an operator's outcome depends only on these tables, so each operator is classified once
    per process instead of once per ``measure_flops`` call. ``funcs`` keeps every classified
    operator alive, so an id is never reused for another operator.
    """

    key: tuple[int, int]
    table: dict[Any, RawFormula]
    shares: dict[Any, int]
    entries: dict[int, Entry] = field(default_factory=dict)
    funcs: list[Any] = field(default_factory=list)


_BASE: _Base | None = None
# packet name -> why it counts 0 FLOPs; depends only on IGNORED and the namespace, never on a
# counter's custom mapping (a custom formula makes the operator counted, not ignored)
IGNORED_REASONS: dict[str, str] = {}


def base_tables() -> _Base:
    """The merged formula table and product shares, rebuilt only when a registry grows.

    Building them hashes every packet through Python-level ``__hash__``, which cost more than
    a small model's whole forward when done per counter. Precedence: torch's shipped formulas
    < this package's (same arithmetic for mm, addmm, bmm, baddbmm, convolution and
    _convolution, read off the tensors without torch's pytree mapping; grouped convolution
    backward and the SDPA kernels counted differently, see operator_formulas) < formulas
    registered with torch after import. Published as one tuple, so a concurrent reader never
    sees a table without its shares.
    """
    global _BASE
    key = (len(_torch_flop_registry), len(FORMULAS))
    base = _BASE
    if base is None or base.key != key:
        shipped = {k: fn for k, fn in _torch_flop_registry.items() if k in _TORCH_BUILTIN}
        added = {k: fn for k, fn in _torch_flop_registry.items() if k not in _TORCH_BUILTIN}
        table = {
            **{k: _adapt_torch_formula(fn) for k, fn in shipped.items()},
            **FORMULAS,
            **{k: _adapt_torch_formula(fn) for k, fn in added.items()},
        }
        shares = dict.fromkeys(shipped, SHARE_ALL)
        for packet in FORMULAS:
            shares[packet] = _SHARE_CODES[PRODUCT_SHARE.get(packet, "none")]
        shares.update(dict.fromkeys(added, SHARE_UNKNOWN))
        base = _BASE = _Base(key, table, shares)
    return base
