"""Built-in module formulas: importing this package fills the handler registry.

One file per module family; each registers its handlers with ``register_handler``.
"""

from __future__ import annotations

from . import (  # noqa: F401  (imported for their registrations)
    activation,
    attention,
    conv,
    embedding,
    linear,
    norm,
    passthrough,
    pooling,
    recurrent,
    subclasses,
    transformer,
    upsample,
)
