"""Formula families on single operators, each expected number derived beside it."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

from torchscan_stages.analysis.operator_formulas import FORMULAS, IGNORED
from torchscan_stages.analysis.operator_formulas.attention import (
    sdpa_backward_products,
    sdpa_products,
)
from torchscan_stages.analysis.operator_formulas.pooling import adaptive_window_elements
from torchscan_stages.analysis.operators import measure_flops

aten = torch.ops.aten


def flops(fn, *, grad: bool = False) -> dict[str, int]:
    def workload() -> None:
        with torch.set_grad_enabled(grad):
            fn()

    report = measure_flops(workload)
    assert report.total.status == "complete", report.diagnostics
    return {name: int(op.flops.value or 0) for name, op in report.by_operator.items()}


@pytest.mark.parametrize(
    ("q", "k"), [((2, 4, 10, 8), (2, 4, 6, 8)), ((1, 8, 5, 16), (1, 2, 7, 16))]
)
def test_attention_products_match_torch(q, k) -> None:
    assert sdpa_products(q, k, k) == sdpa_flop_count(q, k, k)
    assert sdpa_backward_products(q, k, k) == sdpa_backward_flop_count(q, q, k, k)


def test_registries_are_disjoint() -> None:
    assert not set(FORMULAS) & set(IGNORED)


def test_pointwise_and_reductions() -> None:
    x = torch.randn(4, 6)
    y = torch.randn(4, 6)
    got = flops(lambda: (x.add(y), x.exp(), torch.addcmul(x, x, y), x.sum(), x.mean(dim=1)))
    assert got["aten.add"] == 24  # 1 per output element
    assert got["aten.exp"] == 24
    assert got["aten.addcmul"] == 72  # 3 per element: 3*24
    assert got["aten.sum"] == 24  # 1 per input element
    assert got["aten.mean"] == 28  # 24 inputs + 4 divides
    assert flops(lambda: x.var(dim=1))["aten.var"] == 100  # 4*24 + 4 outputs


def test_softmax_family() -> None:
    x = torch.randn(2, 10, requires_grad=True)
    got = flops(lambda: F.log_softmax(x, -1).sum().backward(), grad=True)
    assert got["aten._log_softmax"] == 100  # 5 per element * 20
    assert got["aten._log_softmax_backward_data"] == 80  # 4 per element * 20


def test_norms() -> None:
    x = torch.randn(2, 5, 8)
    img = torch.randn(2, 3, 4, 4)
    ln = nn.LayerNorm(8)
    bn = nn.BatchNorm2d(3)
    assert flops(lambda: ln(x))["aten.native_layer_norm"] == 640  # 80 * (4 stats + 2 + 2)
    bn.train()
    # 96 elements * (4 + 2 + 2) + running stats update 4 * 3 channels = 780
    assert flops(lambda: bn(img))["aten.native_batch_norm"] == 780
    bn.eval()
    assert flops(lambda: bn(img))["aten.native_batch_norm"] == 384  # 96 * (2 + 2)
    gn = nn.GroupNorm(1, 3, affine=False)
    assert flops(lambda: gn(img))["aten.native_group_norm"] == 576  # 96 * (4 + 2)
    w = torch.ones(8)
    assert flops(lambda: F.rms_norm(x, (8,), w))  # counted (fused or decomposed)


def test_pooling_and_interpolation() -> None:
    img = torch.randn(1, 2, 4, 4)
    assert flops(lambda: F.max_pool2d(img, 2))["aten.max_pool2d_with_indices"] == 32
    # 8 outputs * 4 kernel elements
    assert flops(lambda: F.avg_pool2d(img, 2))["aten.avg_pool2d"] == 32
    # windows of 5 -> 3: sizes 2, 3, 2 -> 7 per dim; 49 per channel, 2 channels
    assert adaptive_window_elements((5, 5), (3, 3)) == 49
    big = torch.randn(1, 2, 5, 5)
    assert flops(lambda: F.adaptive_avg_pool2d(big, 3))["aten._adaptive_avg_pool2d"] == 98
    up = flops(lambda: F.interpolate(img, scale_factor=2, mode="bilinear"))
    assert up["aten.upsample_bilinear2d"] == 896  # 7 * (2*8*8)


def test_embedding_counts_zero_and_backward_accumulates() -> None:
    emb = nn.Embedding(10, 4)
    idx = torch.tensor([[1, 2, 3]])
    got = flops(lambda: emb(idx).sum().backward(), grad=True)
    assert got["aten.embedding"] == 0  # a lookup: counted, no arithmetic
    assert got["aten.embedding_dense_backward"] == 12  # 1 per grad element: 3*4


def test_rnn_mkldnn_layer_formula() -> None:
    if not torch.backends.mkldnn.is_available():
        pytest.skip("oneDNN is not available in this torch build")
    lstm = nn.LSTM(8, 16, batch_first=True).eval()
    x = torch.randn(3, 5, 8)
    got = flops(lambda: lstm(x))
    # rows = 3*5 = 15, G = 64: 15 * (2*8*64 + 2*16*64 + 64 bias + 13*16 gates) = 50160
    assert got["aten.mkldnn_rnn_layer"] == 50160


def test_fused_adam_and_foreach() -> None:
    params = [torch.zeros(3, 4, requires_grad=True), torch.zeros(5, requires_grad=True)]
    for p in params:
        p.grad = torch.ones_like(p)
    fused = torch.optim.Adam(params, fused=True)
    fused.step()
    assert flops(fused.step)["aten._fused_adam_"] == 221  # 13 per element * 17 elements
    foreach = torch.optim.SGD(params, lr=0.1, foreach=True)
    assert flops(foreach.step)["aten._foreach_add_"] == 17  # one add per element


def test_attention_fused_kernels_direct() -> None:
    q = torch.randn(1, 2, 4, 8)
    got = flops(lambda: F.scaled_dot_product_attention(q, q, q))
    # products 4*1*2*4*4*8 = 1024; scaling q and k 2*64 = 128; softmax 5 * 32 scores = 160
    assert got["aten._scaled_dot_product_flash_attention_for_cpu"] == 1312


def test_weight_norm_forward_and_backward() -> None:
    from torch.nn.utils.parametrizations import weight_norm

    conv = weight_norm(torch.nn.Conv1d(4, 6, 3, bias=False), dim=0)  # v (6, 4, 3), g (6, 1, 1)
    x = torch.randn(1, 4, 10)
    by_op = measure_flops(lambda: conv(x).sum().backward()).by_operator
    # forward: 3 per element of v (72) + 2 per norm (6): 216 + 12 = 228
    assert by_op["aten._weight_norm_interface"].flops.value == 228
    # backward: 5 per element + 3 per norm: 360 + 18 = 378
    assert by_op["aten._weight_norm_interface_backward"].flops.value == 378


def test_fft_nominal_counts() -> None:
    x = torch.randn(3, 8)
    # real input, 3 transforms of 8 points: 3 * 2.5 * 8 * log2(8)=3 = 3 * 60 = 180
    assert measure_flops(lambda: torch.fft.rfft(x)).total.value == 180
    # norm="ortho" scales the 3 x 8 outputs: + 24
    assert measure_flops(lambda: torch.fft.fft(x, norm="ortho")).total.value == 180 + 24
    # inverse real: 3 transforms to 8 real points, 60 each, + the default 1/n scaling of 24
    spectrum = torch.fft.rfft(x)
    assert measure_flops(lambda: torch.fft.irfft(spectrum)).total.value == 180 + 24
    # complex, 2 transforms of 4 x 8 = 32 points: 2 * 5 * 32 * log2(32)=5 = 1600
    z = torch.randn(2, 4, 8, dtype=torch.complex64)
    report = measure_flops(lambda: torch.fft.fft2(z))
    assert report.by_operator["aten._fft_c2c"].flops.value == 1600
    # a non-power-of-two length rounds per transform: 5 * 6 * log2(6) = 77.55 -> 78
    w = torch.randn(6, dtype=torch.complex64)
    assert measure_flops(lambda: torch.fft.fft(w)).total.value == 78


def test_polar_counts_cos_sin_and_two_multiplies() -> None:
    magnitude, angle = torch.ones(3, 5), torch.randn(3, 5)
    # 15 complex outputs x (cos + sin + 2 multiplies) = 60
    assert measure_flops(lambda: torch.polar(magnitude, angle)).total.value == 60


def test_fused_encoder_layer_exact_and_repeated_shapes_counted_each_call() -> None:
    """The fused layer's count is kept per distinct shape key: a second call of the same
    shape (a cache hit) and a new sequence length (a miss) each count in full."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    long, short = torch.randn(2, 10, 32), torch.randn(2, 6, 32)

    def workload() -> None:
        with torch.no_grad():
            layer(long), layer(long), layer(short)

    report = measure_flops(workload)
    fused = report.by_operator["aten._transformer_encoder_layer_fwd"]
    # seq 10 (tokens 20, d 8, scores 2*4*10*10 = 800): products = in/out projections
    # 4 * 2*20*32*32 = 163840 + attention 2 * 2*800*8 = 25600 + feed-forward 2 * 2*20*32*64 =
    # 163840 -> 353280; other = qkv bias 20*96 = 1920 + q/k scaling 2*(2*4*10*8) = 1280 +
    # softmax 5*800 = 4000 + activation 20*64 = 1280 + two layer norms 2 * 640*(4+2+2) =
    # 10240 + two residual adds 2*640 = 1280 -> 20000; total 373280.
    # seq 6 (tokens 12, scores 288): products 98304 + 9216 + 98304 = 205824; other 1152 + 768
    # + 1440 + 768 + 6144 + 768 = 11040; total 216864.
    assert fused.calls == 3
    assert fused.flops.value == 2 * 373280 + 216864
    assert report.product_flops is not None
    assert report.product_flops.value == 2 * 353280 + 205824
