"""Element-wise activations and softmax-like layers.

Convention: every elementary operation (add, multiply, divide, compare, exp, log, tanh, erf,
sqrt) is one FLOP; the per-element costs are in ``ACTIVATION_FLOPS`` with their derivation.
Softmax/LogSoftmax/Softmin: max (1), subtract (1), exp (1), sum (1), divide (1) per element;
LogSoftmax adds one log per row instead of the divide... counted as 5 per element too. MACs
are 0 (no multiply-accumulate; PReLU's product is not accumulated). DMAs = input + output
(+ PReLU weight); an in-place activation still reads and writes every element.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ..handlers import CallContext, register_handler
from ._common import in_out, param_numel, pointwise_rf

ACTIVATION_FLOPS: dict[type[nn.Module], int] = {
    nn.ReLU: 1,  # max(x, 0)
    nn.ReLU6: 2,  # min(max(x, 0), 6)
    nn.Hardtanh: 2,  # two clamps
    nn.LeakyReLU: 2,  # compare, multiply
    nn.PReLU: 2,  # compare, multiply by the learned slope
    nn.Threshold: 1,  # compare
    nn.ELU: 4,  # compare, exp, subtract 1, multiply alpha
    nn.CELU: 5,  # compare, divide by alpha, exp, subtract 1, multiply alpha
    nn.SELU: 5,  # ELU (4) + multiply scale
    nn.GELU: 5,  # 0.5 * x * (1 + erf(x / sqrt 2)): divide, erf, add, 2 multiplies
    nn.Sigmoid: 4,  # 1 / (1 + exp(-x)): negate, exp, add, divide
    nn.Tanh: 1,  # tanh
    nn.SiLU: 5,  # x * sigmoid(x): sigmoid (4) + multiply
    nn.Mish: 5,  # x * tanh(softplus(x)): exp, add, log, tanh, multiply
    nn.Softplus: 6,  # log(1 + exp(beta x)) / beta with threshold: mul, exp, add, log, div, compare
    nn.Hardsigmoid: 4,  # clamp(x / 6 + 0.5): divide, add, two clamps
    nn.Hardswish: 5,  # x * hardsigmoid(x)
    nn.Softsign: 3,  # x / (1 + |x|): abs, add, divide
    nn.Tanhshrink: 2,  # x - tanh(x)
    nn.LogSigmoid: 5,  # -softplus(-x): negate, exp, add, log, negate
    nn.Softmax: 5,  # max, subtract, exp, sum, divide
    nn.Softmin: 6,  # negate + softmax
    nn.LogSoftmax: 5,  # max, subtract, exp, sum, subtract log-sum (the log is per row)
}

GELU_TANH_FLOPS = 9  # 0.5x(1+tanh(c(x + 0.044715 x^3))): 2 mul (cube), mul, add, mul, tanh,
# add, 2 mul


def activation_flops(module: nn.Module) -> int | None:
    """Per-element FLOPs of an activation module, or None when it is not in the table."""
    if isinstance(module, nn.GELU) and module.approximate == "tanh":
        return GELU_TANH_FLOPS
    for cls in type(module).__mro__:
        if cls in ACTIVATION_FLOPS:
            return ACTIVATION_FLOPS[cls]
    return None


@register_handler(*ACTIVATION_FLOPS)
def activation(ctx: CallContext) -> dict[str, Any]:
    x, y = in_out(ctx)
    per_element = activation_flops(ctx.module)
    assert per_element is not None
    flops = x.numel() * per_element
    if isinstance(ctx.module, nn.LogSoftmax):
        flops = x.numel() * 5
    result: dict[str, Any] = {
        "module_flops": flops,
        "macs": 0,
        "dmas": x.numel() + y.numel() + param_numel(ctx.module),
    }
    if not isinstance(ctx.module, (nn.Softmax, nn.Softmin, nn.LogSoftmax)):
        result.update(pointwise_rf())
    return result
