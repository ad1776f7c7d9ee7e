"""A handler claims a subclass only when the subclass runs the computation it describes.

A subclass that keeps its base's ``forward`` gets the base's handler; one that replaces it
gets it only for a call that ran exactly the base's one operator, once (a channels-first
LayerNorm permuting around ``F.layer_norm``); otherwise (a scaled embedding, a
weight-standardised convolution, a double call) its cost comes from its own operators or is
partial, never the base's formula. Every expected number is worked out beside it.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchscan_stages import crawl_module


class ScaledEmbedding(nn.Embedding):
    """M2M100's / Gemma's pattern: the looked-up rows times sqrt(dim)."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return super().forward(ids) * self.embedding_dim**0.5


class ChannelsFirstLayerNorm(nn.LayerNorm):
    """ConvNeXt's pattern: normalise the channels of (B, C, H, W)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class StandardizedConv2d(nn.Conv2d):
    """BiT's pattern: the weight batch-normalised per output channel before the convolution."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = self.weight.reshape(1, self.out_channels, -1)
        weight = F.batch_norm(flat, None, None, training=True, momentum=0.0, eps=1e-6)
        return F.conv2d(x, weight.reshape_as(self.weight), self.bias)


class TwiceLinear(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(super().forward(x))


class PlainSubclass(nn.Linear):  # keeps Linear.forward
    pass


def _record(model: nn.Module, path: str, *args: torch.Tensor, **kwargs: object) -> object:
    report = crawl_module(model, args=args, **kwargs)  # type: ignore[arg-type]
    return report, next(r for r in report.layers if r.path == path)


def test_a_scaled_embedding_is_not_a_plain_lookup() -> None:
    model = nn.Sequential(ScaledEmbedding(96, 512))
    ids = torch.zeros(1, 8, dtype=torch.long)
    report, record = _record(model, "0", ids)
    assert record.handler is None  # the Embedding formula (0 FLOPs) would miss the scale
    # the multiply M2M100 adds: 8 tokens x 512 = 4,096 FLOPs dispatched, 0 MACs
    assert record.operator_flops.own.value == 8 * 512 == 4_096
    assert record.metrics.module_flops.status == "unavailable"
    assert record.metrics.macs.value == 0 and record.metrics.macs.is_complete
    assert report.totals.module_flops.status == "partial"
    (why,) = [d for d in report.diagnostics if d.code == "unsupported_module"]
    assert "it replaces Embedding.forward and runs other arithmetic" in why.message
    filled = crawl_module(model, args=(ids,), fill_from_operators=[ScaledEmbedding])
    assert filled.totals.module_flops.value == 4_096  # from its own operators, on request


def test_a_channels_first_layer_norm_keeps_the_layer_norm_formula() -> None:
    x = torch.rand(1, 8, 4, 4)
    _, subclass = _record(nn.Sequential(ChannelsFirstLayerNorm(8)), "0", x)
    _, plain = _record(nn.Sequential(nn.LayerNorm(8)), "0", x.permute(0, 2, 3, 1))
    assert subclass.handler is not None and "verified" in subclass.handler
    # the same normalisation of 16 positions x 8 channels: the same formula numbers
    assert subclass.metrics.module_flops == plain.metrics.module_flops
    assert subclass.metrics.module_flops.is_complete


def test_a_weight_standardized_conv_is_not_a_plain_conv() -> None:
    report, record = _record(
        nn.Sequential(StandardizedConv2d(2, 4, 3)), "0", torch.rand(1, 2, 6, 6)
    )
    assert record.handler is None
    assert record.metrics.module_flops.status == "unavailable"
    # the batch norm of the 4 x 18 weight runs beside the convolution's 2 * 4*4*4 * 18 products
    ops = {op for op, count in report.operator_flops.by_operator.items() if count.calls}
    assert {"aten.native_batch_norm", "aten.convolution"} <= ops
    assert report.layers[1].operator_flops.own_products.value == 2 * 4 * 4 * 4 * 18 == 2_304


@pytest.mark.parametrize(
    ("module", "claimed"),
    [(TwiceLinear(4, 4), False), (PlainSubclass(4, 4), True), (nn.Dropout(0.5), True)],
    ids=["twice", "plain-subclass", "dropout"],
)
def test_which_subclasses_keep_the_base_handler(module: nn.Module, claimed: bool) -> None:
    _, record = _record(nn.Sequential(module), "0", torch.rand(2, 4))
    assert (record.handler is not None) is claimed
    if isinstance(module, TwiceLinear):  # two products of 2 x 4 x 4: 2 * 32 MACs
        assert record.metrics.macs.value == 64 and record.metrics.module_flops.status != "complete"
    if isinstance(module, PlainSubclass):  # 2 x 4 x 4 = 32 MACs; + 8 bias adds = 72 FLOPs
        assert (record.metrics.macs.value, record.metrics.module_flops.value) == (32, 72)


def test_transformers_subclasses_m2m100_embedding_and_bit_conv() -> None:
    """The issue's cases on transformers' own classes (built from tiny configs)."""
    pytest.importorskip("transformers")
    from torchscan_stages.integrations.hf_models import build_hf_model, token_inputs

    m2m = build_hf_model(
        "M2M100Config",
        attn_implementation="eager",
        encoder_layers=1,
        decoder_layers=1,
        d_model=512,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=16,
        decoder_ffn_dim=16,
        vocab_size=32,
        scale_embedding=True,
        max_position_embeddings=16,
    )
    ids = token_inputs(batch_size=1, seq_len=8, vocab_size=32)
    report = crawl_module(m2m.get_encoder(), kwargs=ids)
    embed = next(r for r in report.layers if r.type == "M2M100ScaledWordEmbedding")
    # was: the Embedding formula's complete 0 FLOPs; the scale is 8 tokens x 512 = 4,096
    assert embed.handler is None and embed.metrics.module_flops.status == "unavailable"
    assert embed.operator_flops.own.value == 4_096
    bit = build_hf_model(
        "BitConfig",
        attn_implementation="eager",
        embedding_size=32,
        hidden_sizes=[128],
        depths=[1],
        layer_type="preactivation",
    )
    report = crawl_module(bit, kwargs={"pixel_values": torch.rand(1, 3, 16, 16)})
    convs = [r for r in report.layers if r.type == "WeightStandardizedConv2d"]
    assert convs and all(r.handler is None for r in convs)
    assert all(r.metrics.module_flops.status == "unavailable" for r in convs)
    assert report.totals.module_flops.status == "partial"
