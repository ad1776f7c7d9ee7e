"""Checkpoint recomputation runs under the same prediction modes as the forward it repeats.

Activation checkpointing recomputes a region's forward during backward, and torch's
autograd engine does not carry torch-function modes into backward (dispatch modes, such as
the tracker, it does). So the recomputed forward ran without the prediction's CUDA
semantics (``cuda_semantics.py``) and scalar-read handling (``scalar_reads.py``): under
``device="cuda"`` the forward took CUDA's memory-efficient SDPA kernel (7 saved tensors)
and the recomputation the CPU's flash kernel (5), and non-reentrant checkpointing, the
default of ``gradient_checkpointing_enable()``, raised ``CheckpointError`` (41 vs 39 saved
tensors on the issue's model). While a prediction runs, both checkpoint forms re-enter the
prediction's torch-function modes around their recomputation: non-reentrant through its
``context_fn`` (the user's own recompute context is kept, inside), reentrant around
``CheckpointFunction.backward``. Put back afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch.utils.checkpoint as checkpoint
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack


@contextlib.contextmanager
def _entered(modes: list[TorchFunctionMode], inner: Any = None) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        if inner is not None:
            stack.enter_context(inner)
        active = {id(mode) for mode in _get_current_function_mode_stack()}
        for mode in modes:  # bottom of the stack first, as the forward had them
            if id(mode) not in active:
                stack.enter_context(mode)
        yield


@contextlib.contextmanager
def modes_in_recomputation() -> Iterator[None]:
    """While entered: checkpoint recomputation runs under the torch-function modes active
    now (enter this after the prediction's modes)."""
    modes = list(_get_current_function_mode_stack())
    generator = checkpoint._checkpoint_without_reentrant_generator
    backward = checkpoint.CheckpointFunction.backward

    def without_reentrant(
        fn: Any, preserve_rng_state: bool = True, context_fn: Any = checkpoint.noop_context_fn,
        *rest: Any, **kwargs: Any,
    ) -> Any:  # fmt: skip
        def contexts() -> tuple[Any, Any]:
            forward, recompute = context_fn()
            return forward, _entered(modes, recompute)

        return generator(fn, preserve_rng_state, contexts, *rest, **kwargs)

    def reentrant_backward(ctx: Any, *grads: Any) -> Any:
        with _entered(modes):
            return backward(ctx, *grads)

    checkpoint._checkpoint_without_reentrant_generator = without_reentrant
    checkpoint.CheckpointFunction.backward = staticmethod(reentrant_backward)  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        checkpoint._checkpoint_without_reentrant_generator = generator
        checkpoint.CheckpointFunction.backward = staticmethod(backward)  # type: ignore[method-assign, assignment]
