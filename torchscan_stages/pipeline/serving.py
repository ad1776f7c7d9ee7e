"""The configured workload as a request handler for the serve stage.

One request is one call of the configured model on the configured input (its batch is the
request's); with ``serve.max_batch > 1`` the server loop's gathered requests run as one
forward over their inputs stacked on dim 0 (``serve.batching``). Grad mode and precision
are the workload's (no_grad, the configured precision region).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..serve.batching import single_forward, stacked_forward
from .workload import BuiltWorkload

SAMPLES = 8  # LoadGen's sample library: the configured input, 8 times (one tensor object)


def served_handler(built: BuiltWorkload, max_batch: int) -> tuple[Callable[..., Any], list[Any]]:
    """(handler, samples) serving ``built``'s model on its inputs."""
    import torch

    model, region = built.model, built.precision_context

    def forward(*args: Any, **kwargs: Any) -> Any:
        with torch.no_grad(), region():
            return model(*args, **kwargs)

    sample = (built.inputs, built.kwargs)
    handler = stacked_forward(forward) if max_batch > 1 else single_forward(forward)
    return handler, [sample] * SAMPLES
