"""Libraries' "am I being traced?" checks, answered as for the real run.

transformers asks ``is_tracing(tensor)``, which is true for a ``FakeTensor``; a fake run
then takes the tracing branch: it builds the 4-D causal mask (and repeats the KV heads for
grouped-query attention) that the real run skips for an all-ones ``attention_mask``
(``masking_utils._ignore_causal_mask_sdpa``), 1.58x the real peak of a Llama no-grad forward
at sequence 512. During a prediction the check says "not traced" for a fake tensor that
carries its real value (``values.py``: the mask made from the user's input), so the real
branch reads the real value. A fake tensor with no value still says "traced": that branch
is the one taken, recorded here, and the result names it (``branch_assumed``).

Patched for the prediction only (``transformers.utils.import_utils.is_fake_tensor``, the one
place transformers tests for a FakeTensor; ``is_tracing`` reads it at call time), and only
when transformers is already imported; put back afterwards.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from ..report import Diagnostic
from .values import KnownValues

_HF_IMPORT_UTILS = "transformers.utils.import_utils"
_HELPERS = ("import_utils.py", "generic.py")


class TracingChecks:
    """Where a library asked "is this traced?" of a fake tensor with no value."""

    def __init__(self) -> None:
        self.assumed: dict[str, int] = {}  # user line -> calls answered "traced"

    def diagnostics(self) -> list[Diagnostic]:
        if not self.assumed:
            return []
        lines = "; ".join(f"{line} ({count}x)" for line, count in self.assumed.items())
        return [
            Diagnostic(
                code="branch_assumed",
                severity="warning",
                metric="peak",
                count=sum(self.assumed.values()),
                message="transformers asked whether a tensor is being traced and its value "
                "is not known (it was computed by the model, or is too large to keep), so "
                "the prediction took the tracing branch (e.g. a materialised 4-D attention "
                "mask) where the real run may take the eager one: the figure may be either "
                f"side of the real peak; at {lines}. Pass the inputs (attention_mask, ids) "
                "built outside the step so their values are known",
            )
        ]


def _asking_line() -> str:
    """``file:line`` of the code that asked ``is_tracing`` (past transformers' utilities)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.endswith(_HELPERS):
        frame = frame.f_back  # type: ignore[assignment]
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"


@contextlib.contextmanager
def answered_as_real(values: KnownValues) -> Iterator[TracingChecks]:
    """While the fake run is on: a fake tensor that carries its value is not "traced"."""
    checks = TracingChecks()
    import_utils: Any = sys.modules.get(_HF_IMPORT_UTILS)
    original = getattr(import_utils, "is_fake_tensor", None)
    if import_utils is None or original is None:
        yield checks
        return

    def is_fake_tensor(tensor: Any) -> bool:
        if not original(tensor):
            return False
        if values.value_of(tensor) is not None:
            return False
        line = _asking_line()
        checks.assumed[line] = checks.assumed.get(line, 0) + 1
        return True

    import_utils.is_fake_tensor = is_fake_tensor
    try:
        yield checks
    finally:
        import_utils.is_fake_tensor = original
