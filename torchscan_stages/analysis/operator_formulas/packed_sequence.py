"""Packed sequences (``torch.nn.utils.rnn``): pure data movement, 0 FLOPs.

``pack_padded_sequence`` / ``pack_sequence`` gather the valid time steps of a padded batch
into one ``[sum(lengths), *]`` tensor (``aten._pack_padded_sequence``);
``pad_packed_sequence`` scatters them back (``aten._pad_packed_sequence``,
``aten.pad_sequence``, or the copies they decompose into). No value is computed (their DMAs
are counted: ``moved_elements.py``); the RNN's own work on the packed data is counted by its
formula (``rnn.py``) and module handler. Without this entry every packed-LSTM model's
operator count was a lower bound (``_pack_padded_sequence`` had no formula).
"""

from __future__ import annotations

from typing import Any

from ._registry import arg, ignore, numel
from .ignored import MOVE
from .moved_elements import moved

ignore(
    MOVE,
    "_pack_padded_sequence",
    "_pad_packed_sequence",
    "_pack_padded_sequence_backward",
    "pad_sequence",
)


@moved("_pack_padded_sequence")
def _pack(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """Gather the valid steps: read them and the lengths, write the data and batch sizes."""
    data, batch_sizes = out
    return 2 * data.numel() + numel(arg(args, kwargs, 1, "lengths")) + batch_sizes.numel()
