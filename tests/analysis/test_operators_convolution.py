"""Convolution backward FLOPs: grouped, depthwise and transposed, against hand arithmetic.

Convention (2 per multiply-add, every output position): a convolution's forward costs
``2 * N * C_out * (C_in / groups) * prod(kernel) * prod(out_spatial)`` (transposed: the input's
spatial map, and C_in x C_out/groups). Its backward costs the same again for grad_input and
again for grad_weight, so a training step's convolution work is 3x the forward whatever
``groups`` is. torch's FlopCounterMode counts the weight gradient ``groups`` times too large;
where it does, the tests pin that difference down.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from torch.utils.flop_counter import FlopCounterMode

from torchscan_stages.analysis.operator_formulas.convolution import conv_backward_flops
from torchscan_stages.analysis.operators import measure_flops

aten = torch.ops.aten

CASES = [
    # depthwise 3x3, 64 channels: 2 * N2 * Cout64 * Cin/g1 * k9 * Ho8*Wo8 = 147456
    pytest.param(
        nn.Conv2d(64, 64, 3, padding=1, groups=64, bias=False),
        (2, 64, 8, 8),
        147456,
        64,
        id="depthwise",
    ),
    # grouped 8->12, groups 4, stride 2: Ho = (10 + 2 - 3)//2 + 1 = 5
    # 2 * N2 * Cout12 * Cin/g2 * k9 * 25 = 21600
    pytest.param(
        nn.Conv2d(8, 12, 3, stride=2, padding=1, groups=4, bias=False),
        (2, 8, 10, 10),
        21600,
        4,
        id="grouped",
    ),
    # transposed depthwise, 8 groups, stride 2: weight (8, 1, 3, 3); over the input's 5x5
    # 2 * N2 * Cin8 * Cout/g1 * k9 * 25 = 7200
    pytest.param(
        nn.ConvTranspose2d(8, 8, 3, stride=2, groups=8, bias=False),
        (2, 8, 5, 5),
        7200,
        8,
        id="transposed-depthwise",
    ),
    # transposed grouped 6->6, groups 2: weight (6, 3, 3, 3); 2 * N1 * 6 * 3 * 9 * 16 = 5184
    pytest.param(
        nn.ConvTranspose2d(6, 6, 3, groups=2, bias=False),
        (1, 6, 4, 4),
        5184,
        2,
        id="transposed-grouped",
    ),
    # ungrouped, with a bias (its gradient is a sum: not counted, as the bias add is not)
    # 2 * N1 * Cout5 * Cin3 * k9 * 36 = 9720
    pytest.param(nn.Conv2d(3, 5, 3, bias=True), (1, 3, 8, 8), 9720, 1, id="plain"),
]


def _step(conv: nn.Module, x: torch.Tensor) -> None:
    y = conv(x)
    y.backward(torch.ones_like(y))  # no loss: only the convolution and its backward count


@pytest.mark.parametrize(("conv", "x_shape", "forward", "groups"), CASES)
def test_backward_is_twice_the_forward(conv, x_shape, forward, groups) -> None:
    x = torch.randn(x_shape, requires_grad=True)
    report = measure_flops(lambda: _step(conv, x))
    assert report.by_operator["aten.convolution"].flops.value == forward
    # grad_input + grad_weight, each the forward's multiply-adds
    assert report.by_operator["aten.convolution_backward"].flops.value == 2 * forward
    assert report.total.value == 3 * forward
    assert report.product_flops is not None and report.product_flops.value == 3 * forward


@pytest.mark.parametrize(("conv", "x_shape", "forward", "groups"), CASES)
def test_torch_counts_the_weight_gradient_groups_times(conv, x_shape, forward, groups) -> None:
    """Where this project and FlopCounterMode differ: torch's grad_weight is ``groups`` x ours
    (depthwise 64: its backward is 1 + 64 = 65x the forward, ours 2x)."""
    x = torch.randn(x_shape, requires_grad=True)
    with FlopCounterMode(display=False) as mode:
        _step(conv, x)
    by_op = mode.get_flop_counts()["Global"]
    assert by_op[aten.convolution_backward] == forward + groups * forward


def test_input_without_grad_counts_the_weight_gradient_only() -> None:
    # a first layer: output_mask = (False, True, False); depthwise 16 ch 3x3 pad 1 on 6x6
    # forward 2 * 1 * 16 * 1 * 9 * 36 = 10368; backward = grad_weight only = 10368
    conv = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
    x = torch.randn(1, 16, 6, 6)
    report = measure_flops(lambda: _step(conv, x))
    assert report.by_operator["aten.convolution_backward"].flops.value == 10368


def test_pure_formula_with_integers() -> None:
    # depthwise 64 ch, 3x3, N1, 8x8 out: forward 2 * 64 * 9 * 64 = 73728
    grad_out, x, w = (1, 64, 8, 8), (1, 64, 8, 8), (64, 1, 3, 3)
    assert conv_backward_flops(grad_out, x, w) == 2 * 73728
    assert conv_backward_flops(grad_out, x, w, output_mask=(True, False, False)) == 73728
    assert conv_backward_flops(grad_out, x, w, output_mask=(False, False, True)) == 0
    # transposed: weight (Cin4, Cout/g 2, 2, 2), input 3x3 -> output 6x6 (stride 2)
    # forward over the input map: 2 * N1 * 4 * 2 * 4 * 9 = 576; backward 2 * 576
    assert conv_backward_flops((1, 4, 6, 6), (1, 4, 3, 3), (4, 2, 2, 2), transposed=True) == 1152


class _DepthwiseSeparable(nn.Module):
    """stem 3->16 3x3, depthwise 16 3x3, pointwise 16->32 1x1 (MobileNet's block, no bias)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
        self.pointwise = nn.Conv2d(16, 32, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pointwise(self.depthwise(self.stem(x)))


def test_depthwise_separable_training_step() -> None:
    torch.manual_seed(0)
    model = _DepthwiseSeparable().train()
    x = torch.randn(2, 3, 8, 8)  # the input needs no gradient, as in training

    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(x).sum().backward()

    report = measure_flops(step)
    # forward, N2 on 8x8 = 64 positions (padding keeps the size):
    #   stem      2 * 2 * 16 * 3 * 9 * 64 = 110592
    #   depthwise 2 * 2 * 16 * 1 * 9 * 64 =  36864
    #   pointwise 2 * 2 * 32 * 16 * 1 * 64 = 131072      -> forward 278528
    # backward: grad_weight for all three (= forward each), grad_input for depthwise and
    #   pointwise only (the stem's input needs none): 278528 + 36864 + 131072 = 446464
    products = 278528 + 446464  # 724992
    # + the loss: sum over 2 * 32 * 64 = 4096 elements, 1 each; its backward expands (free)
    assert report.product_flops is not None and report.product_flops.value == products
    assert report.total.is_complete and report.total.value == products + 4096
    # torch's FlopCounterMode would add 15 extra depthwise weight gradients: 15 * 36864
    with FlopCounterMode(display=False) as mode:
        step()
    assert mode.get_total_flops() == products + 15 * 36864


@pytest.mark.parametrize(
    ("conv", "x_shape", "forward"),
    [
        # 1d, dilated: Lo = 20 - 2*(5-1) = 12; 2 * N3 * Cout6 * Cin4 * k5 * 12 = 8640
        (nn.Conv1d(4, 6, 5, dilation=2), (3, 4, 20), 8640),
        # 3d, strided, grouped: Do=Ho=Wo = (6-3)//2 + 1 = 2; 2 * N1 * 8 * 4/2 * 27 * 8 = 6912
        (nn.Conv3d(4, 8, 3, stride=2, groups=2), (1, 4, 6, 6, 6), 6912),
        # transposed 1d: over the input's 7 positions; weight (4, 3, 3): 2 * N2 * 4*3 * 3 * 7
        (nn.ConvTranspose1d(4, 3, 3, stride=2), (2, 4, 7), 1008),
    ],
)
def test_forward_formula_is_torch_arithmetic(conv, x_shape, forward) -> None:
    """The forward formula reads the shapes off the tensors; it must equal torch's
    conv_flop_count (what FlopCounterMode reports) and the hand count."""
    x = torch.randn(x_shape)

    def workload() -> None:
        with torch.no_grad():
            conv(x)

    with FlopCounterMode(display=False) as torch_mode:
        workload()
    report = measure_flops(workload)
    assert report.by_operator["aten.convolution"].flops.value == forward
    assert torch_mode.get_total_flops() == forward
