"""The fake run takes the real run's path: the modes that make it so, entered together.

* ``values.py`` (through the tracker): small tensors made from real inputs keep their values;
* ``real_branch.py``: libraries' "am I traced?" checks answered as for the real run;
* ``scalar_reads.py``: a float read no branch uses goes on; rule-answered branches listed;
* ``recompute.py``: checkpoint recomputation runs under the same modes as its forward;
* ``offload.py``: ``save_on_cpu`` under a CUDA prediction moves saved tensors to host.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..report import Diagnostic
from .offload import HostMemory, saved_on_host
from .real_branch import TracingChecks, answered_as_real
from .recompute import modes_in_recomputation
from .scalar_reads import ScalarReads
from .values import KnownValues


@dataclass(eq=False)
class Fidelity:
    """What the modes saw, for the report."""

    checks: TracingChecks
    reads: ScalarReads
    host: HostMemory | None

    def diagnostics(self) -> list[Diagnostic]:
        return self.checks.diagnostics() + self.reads.log.diagnostics()

    def assumptions(self) -> list[str]:
        return self.reads.log.assumptions()


@contextlib.contextmanager
def real_run_semantics(values: KnownValues, modules: Any, cuda: bool) -> Iterator[Fidelity]:
    """Enter after the other torch-function modes (checkpoint recomputation re-enters the
    modes active when this is entered)."""
    with (
        answered_as_real(values) as checks,
        ScalarReads(values, modules) as reads,
        modes_in_recomputation(),
        saved_on_host(cuda) as host,
    ):
        yield Fidelity(checks, reads, host)
