"""A light dispatch probe that tells whether a call did any work (for ``empty_work``).

Only the latency pass uses it: it tracks no tensors itself (the memory pass counts outputs in
its own tracker, the FLOP pass judges its complete total). This probe counts operator calls
and the elements of the non-view tensors they produce, so a batch of 0 (every operator made
an empty tensor) is told apart from real work (see :mod:`.lazy`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..report import Diagnostic
from ..workloads import empty_work_diagnostic
from .memory import _is_view_operator


class WorkProbe(TorchDispatchMode):
    """Counts operators and output elements dispatched under it; changes no result."""

    def __init__(self) -> None:
        super().__init__()
        self.operators = 0
        self.elements_out = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.operators += 1
        if self.elements_out == 0 and not _is_view_operator(func):
            outputs = [out] if isinstance(out, torch.Tensor) else tree_flatten(out)[0]
            for item in outputs:
                if isinstance(item, torch.Tensor):
                    count = item.numel()  # a SymInt under symbolic shapes: not known empty
                    self.elements_out += count if type(count) is int else 1
        return out

    def diagnostic(self, metric: str) -> Diagnostic | None:
        """``empty_work`` when operators ran and every tensor they made was empty."""
        return empty_work_diagnostic(self.operators, self.elements_out, metric)
