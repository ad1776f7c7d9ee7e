"""The fake run takes the real run's path: the modes that make it so, entered together.

* ``values.py`` (through the tracker): small tensors made from real inputs keep their values;
* ``real_branch.py``: libraries' "am I traced?" checks answered as for the real run;
* ``scalar_reads.py``: a float read no branch uses goes on; rule-answered branches listed;
* ``recompute.py``: checkpoint recomputation runs under the same modes as its forward;
* ``offload.py``: ``save_on_cpu`` under a CUDA prediction moves saved tensors to host;
* ``compiled.py``: a step running compiled code is the eager figure, and not complete.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..report import Diagnostic
from .compiled import compile_calls, compiled_diagnostic
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
    compiled: list[str]  # compiled code the step reaches or compiles (compiled.py)

    def diagnostics(self) -> list[Diagnostic]:
        found = self.checks.diagnostics() + self.reads.log.diagnostics()
        return found + compiled_diagnostic(sorted(set(self.compiled)))

    def assumptions(self) -> list[str]:
        return self.reads.log.assumptions()


@contextlib.contextmanager
def real_run_semantics(
    values: KnownValues, modules: Any, cuda: bool, compiled: list[str]
) -> Iterator[Fidelity]:
    """Enter after the other torch-function modes (checkpoint recomputation re-enters the
    modes active when this is entered). ``compiled``: compiled code found before the run."""
    with (
        answered_as_real(values) as checks,
        ScalarReads(values, modules) as reads,
        modes_in_recomputation(),
        saved_on_host(cuda) as host,
        compile_calls() as calls,
    ):
        fidelity = Fidelity(checks, reads, host, compiled)
        yield fidelity
        fidelity.compiled = compiled + calls
