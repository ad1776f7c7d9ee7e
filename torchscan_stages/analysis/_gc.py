"""Pausing the cyclic garbage collector around one analysis pass.

Hooks and dispatch modes allocate many small objects per module call; a full collection
scans every live object, so without a pause the per-layer cost grows with the model. The
pause covers one call; the collector's previous state is restored, also on error.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the block; restore its previous state afterwards."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
