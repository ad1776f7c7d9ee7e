"""The one table of built-in operator formulas and zero-FLOP operators.

Families register with :func:`formula` and :func:`ignore`; both refuse a packet that is
already registered (in either table), so no operator can silently get two meanings. Names are
strings resolved against ``torch.ops.aten`` so that a family file can list an operator that a
given torch build lacks (it is skipped and listed in :data:`MISSING`).

A *raw formula* takes ``(args, kwargs, out)`` exactly as the dispatcher passed them and returns
an int. Raw formulas avoid flattening every argument to shapes on every call, which is what
keeps the counter cheap; torch's registry and user formulas (the ``shape_wrapper`` contract)
are adapted to this signature by the counter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import torch

from ..call_values import arg as arg  # re-exported: the families import it from here


@dataclass(frozen=True, slots=True)
class Flops:
    """A fused operator's count split into tensor-product FLOPs and the rest.

    Fused kernels (attention with its softmax, an RNN layer with its gates, addmm + activation)
    do both kinds of work in one call; returning the two parts lets a report give the
    products-only total that torch's FlopCounterMode and fvcore count, next to the full one.
    """

    products: int
    other: int

    @property
    def total(self) -> int:
        return self.products + self.other

    def __add__(self, more: Flops) -> Flops:
        return Flops(self.products + more.products, self.other + more.other)


RawFormula: TypeAlias = Callable[[tuple[Any, ...], dict[str, Any], Any], "int | Flops"]
Packet: TypeAlias = torch._ops.OpOverloadPacket
ProductShare: TypeAlias = Literal["none", "all", "split"]

FORMULAS: dict[Packet, RawFormula] = {}
IGNORED: dict[Packet, str] = {}
CONVENTIONS: dict[str, str] = {}
MISSING: set[str] = set()
# How much of each formula's count is tensor products (matmul, convolution, attention's two
# batched products): "all", "none" (absent = "none"), or "split" (the formula returns Flops).
PRODUCT_SHARE: dict[Packet, ProductShare] = {}


def _resolve(names: Iterable[str], namespace: str = "aten") -> list[Packet]:
    packets: list[Packet] = []
    ops = getattr(torch.ops, namespace)
    for name in names:
        try:
            packet = getattr(ops, name)
        except (AttributeError, RuntimeError):
            MISSING.add(f"{namespace}.{name}")
            continue
        if packet in FORMULAS or packet in IGNORED or packet in packets:
            raise RuntimeError(f"duplicate registration for {namespace}.{name}")
        packets.append(packet)
    return packets


def formula(
    *names: str, products: ProductShare = "none", namespace: str = "aten"
) -> Callable[[RawFormula], RawFormula]:
    """Register ``fn(args, kwargs, out) -> int`` for each ``<namespace>.<name>`` packet.

    ``products`` says how much of the count is tensor products: ``"none"`` (pointwise,
    normalisation, reductions...), ``"all"`` (matmul, convolution) or ``"split"`` (a fused
    kernel whose formula returns :class:`Flops`). ``namespace``: ``aten`` unless the
    operator lives elsewhere (``quantized.linear_dynamic``). The decorator on a formula's
    own definition (torch's ``register_flop_formula`` pattern); :func:`register_formula` is
    its call form, for formulas built by factories.
    """

    def register(fn: RawFormula) -> RawFormula:
        for packet in _resolve(names, namespace):
            FORMULAS[packet] = fn
            if products != "none":
                PRODUCT_SHARE[packet] = products
        return fn

    return register


def register_formula(fn: RawFormula, *names: str, products: ProductShare = "none") -> None:
    """Non-decorator form of :func:`formula` for formulas built by factories."""
    formula(*names, products=products)(fn)


def ignore(reason: str, *names: str) -> None:
    """Declare ``aten.<name>`` packets as zero-FLOP operators, with the reason shown to users."""
    for packet in _resolve(names):
        IGNORED[packet] = reason


def convention(family: str, text: str) -> None:
    """One line per family stating what its formulas count; copied into every FlopReport."""
    CONVENTIONS[family] = text


# --------------------------------------------------------------------------- helpers


def numel(value: Any) -> int:
    """Elements of a tensor, summed over a list/tuple of tensors; 0 for anything else."""
    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, (list, tuple)):
        return sum(numel(item) for item in value)
    return 0


def first_numel(value: Any) -> int:
    """Elements of a tensor, or of the first tensor of a tuple output (values of max.dim, ...)."""
    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, (list, tuple)) and value:
        return first_numel(value[0])
    return 0


def shape(value: Any) -> tuple[int, ...]:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else ()


def _input_numel(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    return numel(args[0]) if args else numel(kwargs.get("self"))


def per_input_element(flops_per_element: int, per_output: int = 0) -> Any:
    """``k`` FLOPs per element of the first argument (a tensor or a list of them: a
    ``_foreach_*`` op's elements summed), plus ``m`` per output element."""

    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        return flops_per_element * _input_numel(args, kwargs) + per_output * first_numel(out)

    count.__name__ = f"per_input_element_{flops_per_element}_{per_output}"
    return count
