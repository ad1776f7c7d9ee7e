"""Built-in operator FLOP formulas, one module per family, all in one registry.

Importing this package fills :data:`FORMULAS` (``OpOverloadPacket -> raw formula``) and
:data:`IGNORED` (``OpOverloadPacket -> reason``). torch's own ``flop_registry`` is merged on top
by the counter, per call; user ``custom_mapping`` entries are merged on top of both.
"""

from __future__ import annotations

from . import (  # noqa: F401  (registration side effects)
    attention,
    embedding,
    ignored,
    matmul,
    norms,
    optim,
    pointwise,
    pooling,
    reductions,
    rnn,
    softmax,
)
from ._registry import (
    CONVENTIONS,
    FORMULAS,
    IGNORED,
    MISSING,
    PRODUCT_SHARE,
    Flops,
    RawFormula,
)

__all__ = [
    "CONVENTIONS",
    "FORMULAS",
    "IGNORED",
    "MISSING",
    "PRODUCT_SHARE",
    "Flops",
    "RawFormula",
]
