"""Embedded, locally initialised default models and inputs (no downloads, no weights).

They validate runtime behaviour and cost analysis; they say nothing about task accuracy.
Every factory is deterministic for a given seed.

Never: downloads.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .analysis.handlers import CallContext, register_handler


class BasicBlock(nn.Module):
    """A ResNet basic block: two 3x3 convolutions with batch norm and a residual add."""

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class SmallResNet(nn.Module):
    """A compact ResNet-style image classifier (the default CNN)."""

    def __init__(self, num_classes: int = 10, width: int = 16, in_channels: int = 3) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, 1, 1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
        )
        self.layer1 = BasicBlock(width, width)
        self.layer2 = BasicBlock(width, width * 2, stride=2)
        self.layer3 = BasicBlock(width * 2, width * 4, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(width * 4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(self.flatten(self.pool(x)))


class TinyTransformer(nn.Module):
    """A token classifier: embedding, a small Transformer encoder, mean pooling, a head."""

    def __init__(
        self,
        vocab_size: int = 1000,
        d_model: int = 64,
        nhead: int = 4,
        num_layers: int = 2,
        dim_feedforward: int = 128,
        num_classes: int = 10,
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, dropout=0.0, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(self.embedding(tokens))
        return self.head(self.norm(hidden.mean(dim=1)))


@register_handler(BasicBlock)
def _basic_block_own_work(ctx: CallContext) -> dict[str, Any]:
    """The block's own arithmetic is the residual add (convs, norms, relu are children).

    FLOPs: one add per output element; MACs: 0; DMAs: read both operands, write the sum. The
    add is pointwise, so its own receptive field is 1 with stride 1 and no padding.
    """
    elements = ctx.output.numel()
    return {
        "module_flops": elements,
        "macs": 0,
        "dmas": 3 * elements,
        "receptive_field": 1,
        "effective_stride": 1,
        "effective_padding": 0,
    }


@register_handler(TinyTransformer)
def _tiny_transformer_own_work(ctx: CallContext) -> dict[str, Any]:
    """The model's own arithmetic is the mean over the sequence (N, L, D) -> (N, D).

    FLOPs follow the reduction convention: one add per input element plus one divide per
    output element, N*L*D + N*D; MACs: 0; DMAs: read N*L*D, write N*D.
    """
    tokens = ctx.args[0]
    batch, length = tokens.shape[0], tokens.shape[1]
    model = ctx.module
    assert isinstance(model, TinyTransformer)
    width = model.head.in_features
    reduced, kept = batch * length * width, batch * width
    return {"module_flops": reduced + kept, "macs": 0, "dmas": reduced + kept}


def _seeded(seed: int) -> torch.Generator:
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator


def small_resnet(seed: int = 0, **kwargs: int) -> SmallResNet:
    """The default CNN, initialised from ``seed`` without touching the global RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return SmallResNet(**kwargs)


def tiny_transformer(seed: int = 0, **kwargs: int) -> TinyTransformer:
    """The default Transformer, initialised from ``seed`` without touching the global RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TinyTransformer(**kwargs)


def image_batch(
    batch_size: int = 8, channels: int = 3, height: int = 32, width: int = 32, seed: int = 0
) -> tuple[torch.Tensor]:
    """A random image batch (N, C, H, W) from its own generator."""
    return (torch.randn(batch_size, channels, height, width, generator=_seeded(seed)),)


def token_batch(
    batch_size: int = 8, seq_len: int = 32, vocab_size: int = 1000, seed: int = 0
) -> tuple[torch.Tensor]:
    """A random token batch (N, L) of int64 ids from its own generator."""
    return (torch.randint(0, vocab_size, (batch_size, seq_len), generator=_seeded(seed)),)
