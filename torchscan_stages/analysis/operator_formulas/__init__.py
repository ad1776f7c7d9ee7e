"""Built-in operator FLOP formulas, one module per family, all in one registry.

Importing this package fills :data:`FORMULAS` (``OpOverloadPacket -> raw formula``) and
:data:`IGNORED` (``OpOverloadPacket -> reason``). The counter merges them per call: these
formulas outrank torch's shipped ``flop_registry`` (used only for packets this package has no
formula for); formulas a user registers with torch after import outrank these, and user
``custom_mapping`` entries outrank everything.
"""

from __future__ import annotations

from . import (  # noqa: F401  (registration side effects)
    attention,
    convolution,
    embedding,
    fft,
    ignored,
    linalg,
    matmul,
    moved_elements,
    norms,
    optim,
    packed_sequence,
    padding,
    pointwise,
    pooling,
    quantized,
    reductions,
    rnn,
    softmax,
    sorting,
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
from .moved_elements import MOVED

__all__ = [
    "CONVENTIONS",
    "FORMULAS",
    "IGNORED",
    "MISSING",
    "MOVED",
    "PRODUCT_SHARE",
    "Flops",
    "RawFormula",
]
