"""Pausing the cyclic garbage collector around one analysis pass or one page build.

Hooks and dispatch modes allocate many small objects per module call; a full collection
scans every live object, so without a pause the per-layer cost grows with the model. The
pause covers one call; the collector's previous state is restored, also on error.
"""

from __future__ import annotations

import gc
from typing import Any


class gc_paused:  # lower-case: used like the function it was, ``with gc_paused():``
    """Disable the cyclic collector for the block; restore its previous state afterwards.

    A plain class, not a ``contextlib.contextmanager`` generator: the generator's set-up cost
    was a tenth of ``count_workload``'s fixed cost.
    """

    __slots__ = ("_collecting",)

    def __enter__(self) -> None:
        self._collecting = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: Any) -> None:
        if self._collecting:
            gc.enable()
