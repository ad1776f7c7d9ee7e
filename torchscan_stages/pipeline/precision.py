"""The one precision routine: a ``precision`` config entry read once, applied the same way by
every workload the pipeline builds (the measured forward and the predicted step), and the
one training step the predict stage runs.

``cast`` converts the model and floating inputs to the dtype; ``autocast`` runs the call
under ``torch.autocast``; float32 leaves both alone. Torch is imported on first use.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .schema import PrecisionConfig

if TYPE_CHECKING:
    import torch


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a config's ``precision.dtype`` name."""
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


@dataclass(frozen=True)
class Precision:
    """What a ``precision`` entry does to a workload: its dtype, cast or autocast."""

    config: PrecisionConfig
    dtype: torch.dtype
    cast: bool  # model and floating inputs converted to ``dtype``
    autocast: bool  # the call runs under torch.autocast(dtype)

    def region(self, device_type: str) -> contextlib.AbstractContextManager[Any]:
        """The autocast region of a call on ``device_type`` (a no-op unless autocast)."""
        import torch

        if not self.autocast:
            return contextlib.nullcontext()
        return torch.autocast(device_type, dtype=self.dtype)

    def tensor(self, value: Any) -> Any:
        """A floating tensor cast to the dtype under cast precision; anything else as it is."""
        import torch

        if self.cast and isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.to(self.dtype)
        return value

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        """Build a model in the dtype (cast precision) through torch's default dtype: for fake
        parameters, which refuse ``.to(dtype)``; the factories' floating tensors take it too,
        as a cast would give them. The default dtype is restored afterwards."""
        import torch

        before = torch.get_default_dtype()
        if self.cast:
            torch.set_default_dtype(self.dtype)
        try:
            yield
        finally:
            torch.set_default_dtype(before)


def applied(config: PrecisionConfig) -> Precision:
    """``config`` read once: the dtype and whether it is cast or autocast (never float32)."""
    import torch

    dtype = torch_dtype(config.dtype)
    changes = dtype != torch.float32
    return Precision(
        config,
        dtype,
        cast=config.apply == "cast" and changes,
        autocast=config.apply == "autocast" and changes,
    )


def training_step(
    model: Any,
    inputs: tuple[Any, ...],
    kwargs: dict[str, Any],
    precision: Precision,
    *,
    optimizer: str | None,
    device_type: str = "cpu",
) -> None:
    """One training step: forward in the precision's region, a synthetic loss (mean of
    squared floating outputs: its own bytes are a scalar, while the backward pass it starts
    touches every activation the real loss would), backward, then the optimizer's step."""
    import torch
    from torch.utils._pytree import tree_flatten

    step: torch.optim.Optimizer | None = None
    if optimizer == "adamw":
        step = torch.optim.AdamW(model.parameters())
    elif optimizer == "sgd":
        step = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    with precision.region(device_type):
        outputs = [
            t for t in tree_flatten(model(*inputs, **kwargs))[0] if isinstance(t, torch.Tensor)
        ]
        loss = sum(t.float().pow(2).mean() for t in outputs if t.is_floating_point())
    loss.backward()  # type: ignore[union-attr]
    if step is not None:
        step.step()
        step.zero_grad()


__all__ = ["Precision", "applied", "torch_dtype", "training_step"]
