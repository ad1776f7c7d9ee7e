"""Operator FLOPs over torch's dispatch: :class:`OperatorCounter` and :func:`measure_flops`.

One job per module: ``lookup`` (formula tables and the custom mapping), ``counter`` (the
counter and its dispatch hook, one unit), ``tally`` (per-owner records summed into the
report's parts), ``stack`` (the module stack that names the owner), ``fallbacks`` (meta and
fake tensors without a kernel) and ``count`` (the public ``measure_flops`` /
``count_workload``).

Every operator that reaches the dispatcher ends in exactly one of three outcomes, kept apart:

* **counted** -- a formula is known (user ``custom_mapping`` > formulas registered with
  torch's ``register_flop_formula`` after import > this package's ``operator_formulas`` >
  torch's shipped ``flop_registry``); its FLOPs are added (a formula may return 0);
* **ignored** -- a view, metadata, allocation, copy, selection or RNG operator: 0 FLOPs with a
  stated reason, listed in ``ignored_operators``;
* **uncounted** -- no formula and not known to be free: listed with its call count as an
  ``uncounted_operator`` diagnostic; the total becomes a ``partial`` lower bound.

Beside the total, ``product_flops`` keeps the tensor-product share (matmul, convolution,
attention's two batched products, RNN gate products): the convention of torch's
FlopCounterMode and fvcore, so a report can be checked against theirs or a paper's figure.
Every built-in formula declares its share (``operator_formulas.PRODUCT_SHARE``); torch's shipped
registry holds products only. A ``custom_mapping`` formula (or one registered with torch after
import) declares its share by returning :class:`Flops` ``(products, other)``; one that returns
a plain int has an unknown share, which leaves ``product_flops`` a lower bound with an
``unclassified_operator`` diagnostic.

Operators with a CompositeImplicitAutograd kernel and no formula are decomposed (as torch's
FlopCounterMode does) so their parts are counted instead. Formulas are merged into one table
per counter; torch's global registry is never modified.
"""

from __future__ import annotations

from ..operator_formulas import Flops
from .count import count_workload, measure_flops
from .counter import OperatorCounter, never_compiled
from .lookup import OwnerKey, classify_custom_mapping
from .stack import ModuleStack, StackOwner
from .tally import OwnerOps

__all__ = [
    "Flops",
    "ModuleStack",
    "OperatorCounter",
    "OwnerKey",
    "OwnerOps",
    "StackOwner",
    "classify_custom_mapping",
    "count_workload",
    "measure_flops",
    "never_compiled",
]
