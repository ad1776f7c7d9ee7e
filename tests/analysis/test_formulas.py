"""Every built-in formula against hand-derived numbers (arithmetic beside each number) and,
where torch's FlopCounterMode has a formula for the same work, against it."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from torchscan_stages.analysis.crawl import crawl_module
from torchscan_stages.analysis.module_formulas.pooling import adaptive_windows
from torchscan_stages.analysis.module_formulas.recurrent import rnn_cost


def root(module: nn.Module, *args: Any, **kwargs: Any) -> dict[str, Any]:
    report = crawl_module(module, args=args, kwargs=kwargs or None)
    m = report.layers[0].metrics
    return {
        name: getattr(m, name).value
        for name in (
            "module_flops",
            "macs",
            "dmas",
            "receptive_field",
            "effective_stride",
            "effective_padding",
        )
    }


def torch_flops(module: nn.Module, *args: Any, **kwargs: Any) -> int:
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        module.eval()(*args, **kwargs)
    return int(counter.get_total_flops())


def test_linear() -> None:
    layer = nn.Linear(8, 4)
    x = torch.randn(2, 3, 8)
    got = root(layer, x)
    # rows = 2*3 = 6; MACs = 6*8*4 = 192; FLOPs = 2*192 + bias 6*4 = 408
    assert got["macs"] == 192
    assert got["module_flops"] == 408
    # DMAs = input 48 + weight 32 + bias 4 + output 24 = 108
    assert got["dmas"] == 108
    # torch counts the matmul only (no bias add): 2*192 = 384
    assert torch_flops(layer, x) == 384 == got["module_flops"] - 24


def test_parameter_under_two_names_is_read_once() -> None:
    layer = nn.Linear(8, 4)
    layer.weight_alias = layer.weight  # the same tensor registered twice
    x = torch.randn(2, 3, 8)
    # as test_linear: input 48 + weight 32 (once) + bias 4 + output 24 = 108
    assert root(layer, x)["dmas"] == 108


def test_bilinear() -> None:
    layer = nn.Bilinear(3, 4, 5)
    got = root(layer, torch.randn(2, 3), torch.randn(2, 4))
    # MACs = rows 2 * out 5 * in2 4 * (in1 3 + 1) = 160; FLOPs = 320 + bias 2*5 = 330
    assert got["macs"] == 160 and got["module_flops"] == 330
    # DMAs = x1 6 + x2 8 + weight 60 + bias 5 + out 10 = 89
    assert got["dmas"] == 89
    assert got["receptive_field"] is None


@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_groups_dilation(bias: bool) -> None:
    conv = nn.Conv2d(4, 8, 3, stride=2, padding=2, dilation=2, groups=2, bias=bias)
    x = torch.randn(1, 4, 9, 9)
    got = root(conv, x)
    # out spatial = floor((9 + 4 - 2*2 - 1)/2) + 1 = 5 -> output 8*5*5 = 200 elements
    # MACs = 200 * (4/2) * 9 = 3600; FLOPs = 7200 (+ 200 bias adds)
    assert got["macs"] == 3600
    assert got["module_flops"] == 7200 + (200 if bias else 0)
    # DMAs = input 324 + weight 8*2*9=144 (+8 bias) + output 200
    assert got["dmas"] == 324 + 144 + (8 if bias else 0) + 200
    # RF: dilated kernel 2*(3-1)+1 = 5, stride 2, padding 2
    assert (got["receptive_field"], got["effective_stride"], got["effective_padding"]) == (5, 2, 2)
    assert torch_flops(conv, x) == 7200


def test_conv1d_and_3d_match_torch() -> None:
    c1 = nn.Conv1d(3, 6, 5, bias=False)
    x1 = torch.randn(2, 3, 20)
    # out length 16: MACs = 2*6*16 * 3 * 5 = 2880 -> FLOPs 5760
    assert root(c1, x1)["module_flops"] == 5760 == torch_flops(c1, x1)
    c3 = nn.Conv3d(2, 3, (1, 2, 2), bias=False)
    x3 = torch.randn(1, 2, 3, 4, 4)
    # out 3x3x3 per channel: 3*27 = 81 outputs; MACs = 81 * 2 * 4 = 648 -> 1296
    assert root(c3, x3)["module_flops"] == 1296 == torch_flops(c3, x3)


def test_depthwise_conv() -> None:
    conv = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
    x = torch.randn(1, 8, 6, 6)
    # output 8*36 = 288; MACs = 288 * (8/8) * 9 = 2592
    assert root(conv, x)["macs"] == 2592
    assert torch_flops(conv, x) == 2 * 2592


@pytest.mark.parametrize("stride,output_padding", [(1, 0), (2, 1), (3, 2)])
def test_conv_transpose_not_overcounted_by_stride(stride: int, output_padding: int) -> None:
    conv = nn.ConvTranspose2d(4, 6, 3, stride=stride, output_padding=output_padding)
    x = torch.randn(1, 4, 5, 5)
    got = root(conv, x)
    # every input element meets 6 * 9 weights: MACs = 4*25 * 6*9 = 5400, for any stride
    assert got["macs"] == 5400
    side = (5 - 1) * stride + 3 + output_padding  # output spatial size
    # FLOPs = 2 * 5400 + bias adds on 6*side*side outputs
    assert got["module_flops"] == 10800 + 6 * side * side
    assert torch_flops(conv, x) == 10800
    # RF of a transposed conv: ceil(3/s) inputs per output; stride 1/s
    assert got["receptive_field"] == -(-3 // stride)
    assert got["effective_stride"] == (1 if stride == 1 else 1 / stride)


def test_conv_transpose_1d_groups() -> None:
    conv = nn.ConvTranspose1d(4, 6, 4, stride=2, groups=2, bias=False)
    x = torch.randn(2, 4, 7)
    # MACs = input 2*4*7=56 elements * (6/2) * 4 = 672 -> 1344 FLOPs
    assert root(conv, x)["module_flops"] == 1344 == torch_flops(conv, x)


def test_batchnorm_eval_running_stats() -> None:
    bn = nn.BatchNorm2d(3)
    x = torch.randn(2, 3, 4, 4)
    got = root(bn, x)
    # 96 elements: normalise 2*96 + affine 2*96 + per channel (eps, rsqrt) 2*3 = 390
    assert got["module_flops"] == 390
    assert got["macs"] == 96  # affine multiply-add per element
    # DMAs = in 96 + out 96 + weight/bias 6 + running mean/var 6 = 204
    assert got["dmas"] == 204
    assert got["receptive_field"] == 1


def test_layer_group_instance_rms_norm() -> None:
    x = torch.randn(2, 5, 6)
    # LayerNorm(6): 60 elements, 10 groups: stats 4*60 + 2*10, normalise 2*60 + 2*10,
    # affine 2*60 -> 240 + 20 + 120 + 20 + 120 = 520
    assert root(nn.LayerNorm(6), x)["module_flops"] == 520
    # GroupNorm(1 group, 5 channels, no affine) on (2,5,6): groups 2 -> 240+4+120+4 = 368
    assert root(nn.GroupNorm(1, 5, affine=False), x)["module_flops"] == 368
    # InstanceNorm1d(5) (no affine, no running stats): groups 2*5=10 -> 240+20+120+20 = 400
    assert root(nn.InstanceNorm1d(5), x)["module_flops"] == 400
    if hasattr(nn, "RMSNorm"):
        # RMSNorm(6): mean of squares 2*60 + 10, normalise 60 + 2*10, weight 60 -> 270
        assert root(nn.RMSNorm(6), x)["module_flops"] == 270


def test_batchnorm_without_running_stats_uses_batch_statistics() -> None:
    bn = nn.BatchNorm1d(4, track_running_stats=False, affine=False)
    x = torch.randn(3, 4)
    # 12 elements, 4 groups: stats 4*12 + 2*4, normalise 2*12 + 2*4 -> 48+8+24+8 = 88
    assert root(bn, x)["module_flops"] == 88


def test_pooling() -> None:
    x = torch.randn(1, 2, 8, 8)
    mp = root(nn.MaxPool2d(2), x)
    # output 2*4*4 = 32; each window 4 values -> 3 comparisons: 96
    assert mp["module_flops"] == 96 and mp["macs"] == 0
    assert mp["dmas"] == 128 + 32
    assert (mp["receptive_field"], mp["effective_stride"]) == (2, 2)
    ap = root(nn.AvgPool2d(3, stride=1, padding=1), x)
    # output 2*8*8 = 128; 3*3 adds+divide per output -> 9 * 128 = 1152
    assert ap["module_flops"] == 1152
    # MaxPool dilation 2, kernel 3 -> RF 5
    assert root(nn.MaxPool1d(3, dilation=2), torch.randn(1, 1, 10))["receptive_field"] == 5


def test_adaptive_pooling_exact_windows() -> None:
    # in 5 -> out 3: windows [0,2) [1,4) [3,5) -> sizes 2, 3, 2
    assert adaptive_windows(5, 3) == [2, 3, 2]
    x = torch.randn(1, 2, 5, 5)
    avg = root(nn.AdaptiveAvgPool2d(3), x)
    # per plane: (2+3+2)^2 = 49 window elements; 2 planes -> 98 (adds + divides)
    assert avg["module_flops"] == 98
    mx = root(nn.AdaptiveMaxPool2d(3), x)
    # comparisons = 98 - outputs 2*9 = 80
    assert mx["module_flops"] == 80
    glob = root(nn.AdaptiveAvgPool2d(1), torch.randn(1, 4, 6, 6))
    # one window of 36 per plane: 4*36 = 144; RF 6, stride 6
    assert glob["module_flops"] == 144
    assert (glob["receptive_field"], glob["effective_stride"]) == (6, 6)


def test_lp_pool() -> None:
    x = torch.randn(1, 1, 4, 4)
    # powers on 16 inputs + 4 outputs * (4 window + 2) = 16 + 24 = 40
    assert root(nn.LPPool2d(2, 2), x)["module_flops"] == 40


@pytest.mark.parametrize(
    "module,per_element",
    [
        (nn.ReLU(), 1),
        (nn.ReLU6(), 2),
        (nn.LeakyReLU(), 2),
        (nn.ELU(), 4),
        (nn.GELU(), 5),
        (nn.GELU(approximate="tanh"), 9),
        (nn.Sigmoid(), 4),
        (nn.Tanh(), 1),
        (nn.SiLU(), 5),
        (nn.Hardswish(), 5),
        (nn.Softmax(dim=-1), 5),
        (nn.PReLU(), 2),
        (nn.Mish(), 5),
    ],
)
def test_activations(module: nn.Module, per_element: int) -> None:
    x = torch.randn(2, 3, 5)  # 30 elements
    got = root(module, x)
    assert got["module_flops"] == 30 * per_element
    assert got["macs"] == 0
    # read 30 + write 30 (+ PReLU's single weight)
    assert got["dmas"] == 60 + (1 if isinstance(module, nn.PReLU) else 0)


def test_inplace_relu_counts_read_and_write() -> None:
    assert root(nn.ReLU(inplace=True), torch.randn(10))["dmas"] == 20  # 10 read + 10 written


@pytest.mark.parametrize("module", [nn.Dropout(0.5), nn.Identity(), nn.Flatten(), nn.Dropout2d()])
def test_passthrough_is_exact_zero(module: nn.Module) -> None:
    report = crawl_module(module, (2, 3, 4))
    m = report.layers[0].metrics
    assert m.module_flops.status == "complete" and m.module_flops.value == 0
    assert m.dmas.value == 0 and m.receptive_field.value == 1


def test_embedding_and_bag() -> None:
    tokens = torch.tensor([[1, 2, 3, 4]])
    got = root(nn.Embedding(10, 6), tokens)
    # 0 FLOPs; DMAs = 4 indices + 4*6 rows read + 24 written = 52
    assert got["module_flops"] == 0 and got["dmas"] == 52
    bag = nn.EmbeddingBag(10, 6, mode="mean")
    got = root(bag, torch.tensor([[1, 2, 3], [4, 5, 6]]))
    # 6 rows into 2 bags: adds (6-2)*6 = 24 + divides 2*6 = 12 -> 36
    assert got["module_flops"] == 36
    weighted = nn.EmbeddingBag(10, 6, mode="sum")
    got = root(weighted, torch.tensor([1, 2, 3]), torch.tensor([0, 2]), torch.ones(3))
    # per-sample weights: 3 rows * 6 MACs = 18 MACs, 36 FLOPs
    assert got["macs"] == 18 and got["module_flops"] == 36


def test_embedding_max_norm_is_partial() -> None:
    report = crawl_module(nn.Embedding(10, 4, max_norm=1.0), args=(torch.tensor([1, 2]),))
    assert report.layers[0].metrics.module_flops.status == "partial"
    assert any(d.code == "formula_partial" for d in report.diagnostics)


def test_multihead_attention_matches_torch_matmuls() -> None:
    mha = nn.MultiheadAttention(16, 2)
    q, k = torch.randn(5, 1, 16), torch.randn(7, 1, 16)
    got = root(mha, q, k, k)
    # MACs: q proj 5*16*16=1280, k/v proj 7*16*16=1792 each, scores 5*7*16=560, AV 560,
    # out proj 1280 -> 7264
    assert got["macs"] == 7264
    assert torch_flops(mha, q, k, k) == 2 * 7264
    # FLOPs = 14528 + in-proj bias (5*16 + 2*7*16 = 304) + out bias 80 + scaling 80
    # + softmax 5 * (2 heads * 5 * 7 = 70 scores) = 350 + head averaging 5*7*2 = 70
    assert got["module_flops"] == 14528 + 304 + 80 + 80 + 350 + 70


def test_multihead_attention_batch_first_no_weights() -> None:
    mha = nn.MultiheadAttention(8, 2, batch_first=True, bias=False)
    x = torch.randn(3, 4, 8)
    got = root(mha, x, x, x, need_weights=False)
    # N=3, L=S=4, E=8: MACs = 3*(4*64*3 + 2*4*4*8 + 4*64) = 3*(768 + 256 + 256) = 3840
    assert got["macs"] == 3840
    # FLOPs = 7680 + scaling 3*4*8=96 + softmax 5 * 3*2*4*4 = 480 (no bias, no averaging)
    assert got["module_flops"] == 7680 + 96 + 480


def test_transformer_encoder_layer_inclusive() -> None:
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    x = torch.randn(1, 3, 8)
    report = crawl_module(layer, args=(x,))
    rec = report.layers[0]
    assert rec.inclusive
    # attention: MACs 3*64*3 + 2*3*3*8 + 3*64 = 576+144+192 = 912
    # FFN MACs: 3*8*16 + 3*16*8 = 768; LayerNorm affine MACs 2*24 = 48 -> 1728
    assert rec.metrics.macs.value == 912 + 768 + 48
    # FLOPs: attention 2*912 + biases (24+48+24) + scale 24 + softmax 5*18 = 1824+96+24+90
    # = 2034; FFN 2*768 + bias 48+24 = 1608; 2 LayerNorms 2*(4*24+2*3 + 2*24+2*3 + 2*24) =
    # 2*204 = 408; residual adds 2*24 = 48; relu 3*16 = 48 -> 4146
    assert rec.metrics.module_flops.value == 2034 + 1608 + 408 + 48 + 48
    # totals are the layer's own estimate: children are not added again
    assert report.totals.macs.value == rec.metrics.macs.value


def test_transformer_decoder_layer() -> None:
    layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0)
    tgt, mem = torch.randn(3, 1, 8), torch.randn(5, 1, 8)
    got = root(layer, tgt, mem)
    # self-attn MACs 912 (as above); cross: 3*64 + 5*64*2 + 2*3*5*8 + 3*64 = 1264;
    # FFN 768; 3 LayerNorm affines 72 -> 3016
    assert got["macs"] == 912 + 1264 + 768 + 72


@pytest.mark.parametrize(
    "cls,gates,elementwise", [(nn.RNN, 1, 2), (nn.GRU, 3, 17), (nn.LSTM, 4, 22)]
)
@pytest.mark.parametrize("with_h0", [False, True])
def test_recurrent(cls: Any, gates: int, elementwise: int, with_h0: bool) -> None:
    rnn = cls(4, 8, num_layers=2, bidirectional=True, batch_first=True)
    x = torch.randn(3, 5, 4)  # N=3, T=5 -> 15 step-samples
    args: tuple[Any, ...] = (x,)
    if with_h0:
        h0 = torch.zeros(4, 3, 8)
        args = (x, (h0, torch.zeros(4, 3, 8))) if cls is nn.LSTM else (x, h0)
    got = root(rnn, *args)
    # layer 0: G*8*(4+8) per direction-step; layer 1 input 2*8=16: G*8*(16+8)
    macs = 15 * 2 * (gates * 8 * 12 + gates * 8 * 24)
    assert got["macs"] == macs
    # FLOPs = 2*MACs + bias 2*G*8 + elementwise per hidden unit, per layer/direction/step
    assert got["module_flops"] == 2 * macs + 15 * 2 * 2 * (2 * gates * 8 + elementwise * 8)
    if cls is not nn.LSTM:  # torch has no LSTM formula; RNN/GRU decompose into matmuls
        assert torch_flops(rnn, *args) == 2 * macs


def test_recurrent_packed_and_proj() -> None:
    lstm = nn.LSTM(3, 6, proj_size=2)
    packed = nn.utils.rnn.pack_padded_sequence(
        torch.randn(4, 2, 3), torch.tensor([4, 2]), enforce_sorted=True
    )
    got = root(lstm, packed)
    # 6 step-samples; MACs per step 4*6*(3+2) + projection 6*2 = 132 -> 792
    assert got["macs"] == 792
    flops, macs = rnn_cost("LSTM", 6, 3, 6, 1, 1, True, 2)
    assert (flops, macs) == (2 * 792 + 6 * (48 + 22 * 6), 792)


@pytest.mark.parametrize("mode,per_out", [("nearest", 0), ("bilinear", 9), ("bicubic", 35)])
def test_upsample(mode: str, per_out: int) -> None:
    up = nn.Upsample(scale_factor=2, mode=mode)
    got = root(up, torch.randn(1, 2, 3, 3))
    # output 2*6*6 = 72 elements
    assert got["module_flops"] == 72 * per_out
    assert got["dmas"] == 18 + 72
    assert got["effective_stride"] == 0.5
