"""RNN, LSTM and GRU: every layer, both directions, batch_first, packed or padded input.

Convention, per time step, sample, layer and direction, with G gates (RNN 1, LSTM 4, GRU 3),
hidden size H, recurrent width R (proj_size when set, else H) and layer input width I (the
input size for layer 0, directions x R above):
* MACs = G*H*(I + R) (input and recurrent products) + H*R for an LSTM projection;
* FLOPs = 2 x MACs + 2*G*H bias adds (b_ih and b_hh) + element-wise work: RNN 2H (sum of the
  two products, tanh/relu); LSTM 22H (4H gate sums, 3 sigmoids x 4H, tanh H, c = f*c + i*g
  3H, h = o*tanh(c) 2H); GRU 17H (r/z sums 2H, 2 sigmoids x 4H, n = tanh(x_n + r*h_n) 3H,
  h = (1-z)*n + z*h 4H).
A missing initial state is zeros that PyTorch still multiplies, so it costs the same.
Time steps x samples = sum(batch_sizes) for a PackedSequence, else T x N.
DMAs = input + all weights + initial states (given or zero) + output + final states.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

from ..handlers import CallContext, register_handler
from ._common import arg, param_numel

GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
ELEMENTWISE = {"RNN_TANH": 2, "RNN_RELU": 2, "LSTM": 22, "GRU": 17}


def rnn_cost(
    mode: str,
    step_samples: int,
    input_size: int,
    hidden_size: int,
    num_layers: int,
    directions: int,
    bias: bool,
    proj_size: int = 0,
) -> tuple[int, int]:
    """(FLOPs, MACs) of a stacked recurrent layer over ``step_samples`` (T x N) inputs."""
    gates, hidden = GATES[mode], hidden_size
    recurrent = proj_size or hidden
    macs = flops = 0
    for layer in range(num_layers):
        width = input_size if layer == 0 else directions * recurrent
        step_macs = gates * hidden * (width + recurrent) + (hidden * proj_size if proj_size else 0)
        step_flops = 2 * step_macs + (2 * gates * hidden if bias else 0)
        step_flops += ELEMENTWISE[mode] * hidden
        macs += directions * step_macs * step_samples
        flops += directions * step_flops * step_samples
    return flops, macs


def _steps_and_batch(module: nn.RNNBase, x: Any) -> tuple[int, int]:
    if isinstance(x, PackedSequence):
        # tolist: no tensor operator runs, so the crawl's operator count sees none of it
        # (``batch_sizes.sum()`` was counted as 5 FLOPs of the calling module)
        sizes = x.batch_sizes.tolist()
        return sum(sizes), sizes[0] if sizes else 0
    assert isinstance(x, torch.Tensor)
    if x.dim() == 2:  # unbatched (T, features)
        return x.shape[0], 1
    steps, batch = (x.shape[1], x.shape[0]) if module.batch_first else (x.shape[0], x.shape[1])
    return steps * batch, batch


@register_handler(nn.RNN, nn.LSTM, nn.GRU)
def recurrent(ctx: CallContext) -> dict[str, Any]:
    module = ctx.module
    assert isinstance(module, nn.RNNBase)
    x = arg(ctx.args, ctx.kwargs, 0, "input")
    step_samples, batch = _steps_and_batch(module, x)
    directions = 2 if module.bidirectional else 1
    flops, macs = rnn_cost(
        module.mode,
        step_samples,
        module.input_size,
        module.hidden_size,
        module.num_layers,
        directions,
        module.bias,
        module.proj_size,
    )
    recurrent_width = module.proj_size or module.hidden_size
    states = module.num_layers * directions * batch * recurrent_width
    cells = module.num_layers * directions * batch * module.hidden_size
    state_elements = states + (cells if module.mode == "LSTM" else 0)
    in_elements = x.data.numel() if isinstance(x, PackedSequence) else x.numel()
    out_elements = step_samples * directions * recurrent_width
    # initial states read (given or zeros) + final states written
    dmas = in_elements + param_numel(module) + 2 * state_elements + out_elements
    return {"module_flops": flops, "macs": macs, "dmas": dmas}
