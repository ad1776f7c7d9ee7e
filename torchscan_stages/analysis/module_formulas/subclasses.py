"""The operators each base class's forward runs, for subclasses that replace its forward.

A handler describes its class's own forward. A subclass that replaces ``forward`` gets its
base's handler only for a call that ran exactly one of the operators below, once, and no
other arithmetic (views, copies and index building aside): ConvNeXt-V2's channels-first
LayerNorm permutes around ``F.layer_norm``; Pegasus' sinusoidal positions build their indices
with ``arange`` and look them up. A call that computed more (M2M100's and Gemma's scaled word
embeddings multiply the rows, OPT's and ProphetNet's learned positions add offsets to a
cumulative sum, BiT's convolution batch-normalises its weight first) is a module without
handler: its own operators decide (exact zero, partial with ``unsupported_module``, or
``fill_from_operators``), never the base's formula (see ``handlers.lookup_handler``).
"""

from __future__ import annotations

from torch import nn

from ..handlers import base_operators

base_operators(nn.Embedding, operators=("aten.embedding",))
base_operators(nn.Linear, operators=("aten.addmm", "aten.mm"))
base_operators(
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
    operators=("aten.convolution",),
)
base_operators(nn.LayerNorm, operators=("aten.native_layer_norm",))
base_operators(nn.GroupNorm, operators=("aten.native_group_norm",))
base_operators(
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    operators=("aten.native_batch_norm", "aten._native_batch_norm_legit_no_training"),
)
