"""Dynamo's process-wide counters, put back as found after a test that compiles code.

A later test in the same process reads "this process compiled code" from them (the
``compiled_code_eager`` diagnostic), and the frames a test compiled belong to functions no
one can call any more.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def dynamo_counters_as_found() -> Iterator[None]:
    """Within: compile freely; after: ``torch._dynamo.utils.counters`` as they were before."""
    from torch._dynamo.utils import counters

    saved = {key: dict(values) for key, values in counters.items()}
    try:
        yield
    finally:
        counters.clear()
        for key, values in saved.items():
            counters[key].update(values)
