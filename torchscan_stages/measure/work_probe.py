"""A light dispatch probe that tells whether a call did any work (for ``empty_work``).

Only the latency pass uses it: it tracks no tensors itself (the memory pass counts outputs in
its own tracker, the FLOP pass judges its complete total). This probe counts operator calls
and the elements of the non-view tensors they produce, so a batch of 0 (every operator made
an empty tensor) is told apart from real work (see :mod:`.lazy`).
"""

from __future__ import annotations

from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

from ..report import Diagnostic
from ..workloads import WorkTally, empty_work_diagnostic, no_operators_diagnostic
from .memory import _is_view_operator


class WorkProbe(TorchDispatchMode):
    """Counts operators and output elements dispatched under it; changes no result."""

    def __init__(self) -> None:
        super().__init__()
        self.tally = WorkTally()
        self.entered = False

    @property
    def operators(self) -> int:
        """Operator calls dispatched under the probe."""
        return self.tally.operators

    @property
    def elements_out(self) -> int:
        """Elements of the work they did (see :class:`~torchscan_stages.workloads.WorkTally`)."""
        return self.tally.elements_out

    def __enter__(self) -> WorkProbe:
        self.entered = True
        return super().__enter__()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.tally.computed == 0:  # once work is seen, stop paying for the count
            self.tally.add(args, kwargs, out, _is_view_operator(func))
        else:
            self.tally.operators += 1
        return out

    def diagnostic(self, metric: str) -> Diagnostic | None:
        """``empty_work`` when operators ran and every tensor they made was empty;
        ``no_operators`` when the probed call dispatched none (not when nothing was probed)."""
        if not self.entered:
            return None
        return no_operators_diagnostic(
            self.tally.operators, metric, "throughput (work_units per second) is not derived"
        ) or empty_work_diagnostic(self.tally.operators, self.tally.elements_out, metric)
