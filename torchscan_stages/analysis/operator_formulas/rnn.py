"""Recurrent layers and cells: oneDNN layers, whole-network aten ops, cuDNN, fused cells.

Convention (what the decomposed CPU path dispatches, per time step and batch row, with G gate
rows = 4H LSTM, 3H GRU, H RNN): input and hidden products 2*I*G + 2*H*G; the input bias add
G (whole layers precompute x @ W_ih + b_ih for all steps); gate pointwise work per hidden unit
LSTM 13, GRU 10, RNN 2 (1 FLOP per elementwise op, see pointwise). Backward: twice the
products (grad input + grad weights), 2 per bias element, twice the gate pointwise work.
Formulas return Flops(products, other): the products are the tensor-product share.
"""

from __future__ import annotations

from typing import Any

from ._registry import Flops, arg, convention, numel, register_formula

convention(
    "rnn",
    "per step and batch row: 2*I*G + 2*H*G products, G input-bias adds, gate pointwise "
    "per hidden unit LSTM 13 / GRU 10 / RNN 2; backward: 2x products, 2 per bias element, "
    "2x gate pointwise",
)

GATE_POINTWISE = {"lstm": 13, "gru": 10, "rnn_tanh": 2, "rnn_relu": 2}
_MODES = {0: "rnn_relu", 1: "rnn_tanh", 2: "lstm", 3: "gru"}  # cuDNN/oneDNN mode numbers


def layer_flops(
    rows: int,
    input_size: int,
    hidden: int,
    gates: int,
    kind: str,
    *,
    bias: bool,
    proj: int = 0,
    backward: bool = False,
) -> Flops:
    """One direction of one layer over ``rows`` = steps x batch rows."""
    recurrent = proj or hidden
    products = 2 * input_size * gates + 2 * recurrent * gates + (2 * hidden * proj if proj else 0)
    pointwise = GATE_POINTWISE[kind] * hidden
    if backward:
        return Flops(rows * 2 * products, rows * (2 * gates * int(bias) + 2 * pointwise))
    return Flops(rows * products, rows * (gates * int(bias) + pointwise))


def _mkldnn_layer(backward: bool) -> Any:
    """mkldnn_rnn_layer(input, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, batch_sizes, mode,
    hidden_size, num_layers, has_biases, ...); the backward takes the same leading tensors."""

    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Flops:
        x, w_ih = args[0], args[1]
        mode = int(args[14] if backward else args[9])
        hidden = int(args[15] if backward else args[10])
        bias = bool(args[17] if backward else args[12])
        input_size = int(w_ih.shape[1])
        rows = numel(x) // input_size
        return layer_flops(
            rows,
            input_size,
            hidden,
            int(w_ih.shape[0]),
            _MODES[mode],
            bias=bias,
            backward=backward,
        )

    return count


register_formula(_mkldnn_layer(False), "mkldnn_rnn_layer", products="split")
register_formula(_mkldnn_layer(True), "mkldnn_rnn_layer_backward", products="split")


def _network_flops(
    x: Any,
    params: list[Any],
    stride: int,
    kind: str,
    num_layers: int,
    bidirectional: bool,
    bias: bool,
    backward: bool = False,
) -> Flops:
    """Sum over layers and directions; ``params`` is torch's flat weight list (w_ih, w_hh,
    [b_ih, b_hh], [w_hr]) per layer and direction."""
    directions = 2 if bidirectional else 1
    first_input = int(params[0].shape[1])
    rows = numel(x) // first_input
    total = Flops(0, 0)
    for index in range(num_layers * directions):
        group = params[index * stride : (index + 1) * stride]
        w_ih, w_hh = group[0], group[1]
        proj = int(group[-1].shape[0]) if len(group) in (3, 5) else 0
        hidden = int(group[-1].shape[1]) if proj else int(w_hh.shape[1])
        total = total + layer_flops(
            rows,
            int(w_ih.shape[1]),
            hidden,
            int(w_ih.shape[0]),
            kind,
            bias=bias,
            proj=proj,
            backward=backward,
        )
    return total


def _aten_network(kind: str) -> Any:
    """aten.lstm/gru/rnn_*.input(input, hx, params, has_biases, num_layers, dropout, train,
    bidirectional, batch_first) and .data(data, batch_sizes, hx, params, has_biases, ...)."""

    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Flops:
        offset = 0 if isinstance(args[3], bool) else 1  # .data has batch_sizes at 1
        x, params = args[0], list(args[2 + offset])
        bias, layers = bool(args[3 + offset]), int(args[4 + offset])
        bidirectional = bool(args[7 + offset])
        per_layer = len(params) // (layers * (2 if bidirectional else 1))
        return _network_flops(x, params, per_layer, kind, layers, bidirectional, bias)

    return count


for _kind in GATE_POINTWISE:
    register_formula(_aten_network(_kind), _kind, products="split")


def _cudnn(backward: bool) -> Any:
    """_cudnn_rnn(input, weight[], weight_stride0, weight_buf, hx, cx, mode, hidden, proj,
    num_layers, batch_first, dropout, train, bidirectional, ...); backward adds 4 tensors
    after cx (output, grad_output, grad_hy, grad_cy)."""

    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Flops:
        shift = 4 if backward else 0
        params, stride = list(args[1]), int(args[2])
        kind = _MODES[int(args[6 + shift])]
        layers, bidirectional = int(args[9 + shift]), bool(args[13 + shift])
        bias = stride in (4, 5)
        return _network_flops(
            args[0], params, stride, kind, layers, bidirectional, bias, backward=backward
        )

    return count


register_formula(_cudnn(False), "_cudnn_rnn", "miopen_rnn", products="split")
register_formula(_cudnn(True), "_cudnn_rnn_backward", "miopen_rnn_backward", products="split")


def _cell(kind: str) -> Any:
    """lstm_cell/gru_cell/rnn_*_cell(input, hx, w_ih, w_hh, b_ih, b_hh): one step."""

    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Flops:
        w_ih, w_hh = args[2], args[3]
        rows = numel(args[0]) // int(w_ih.shape[1])
        # cells add the two projections (G per row, counted in the pointwise share); biases are
        # fused into addmm, so no separate bias add.
        return layer_flops(
            rows, int(w_ih.shape[1]), int(w_hh.shape[1]), int(w_ih.shape[0]), kind, bias=False
        )

    return count


for _kind in GATE_POINTWISE:
    register_formula(_cell(_kind), f"{_kind}_cell", products="split")


def _fused_cell(kind: str) -> Any:
    """_thnn_fused_lstm_cell/_gru_cell(input_gates, hidden_gates, c_or_h, b_ih, b_hh): the
    pointwise part of a cell (gates precomputed), plus the two bias adds when given."""

    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        gates = args[0]
        rows, width = numel(gates) // int(gates.shape[-1]), int(gates.shape[-1])
        hidden = width // (4 if kind == "lstm" else 3)
        biases = sum(1 for i in (3, 4) if arg(args, kwargs, i, "", None) is not None)
        return rows * (GATE_POINTWISE[kind] * hidden + biases * width)

    return count


register_formula(_fused_cell("lstm"), "_thnn_fused_lstm_cell")
register_formula(_fused_cell("gru"), "_thnn_fused_gru_cell")


def _fused_cell_backward(per_hidden: int) -> Any:
    """_thnn_fused_*_cell_backward_impl(grad_hy, ...): twice the cell's pointwise work."""

    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        grads = [t for t in args if getattr(t, "dim", None) is not None]
        rows_hidden = numel(grads[0]) if grads else 0
        return 2 * per_hidden * rows_hidden

    return count


register_formula(_fused_cell_backward(13), "_thnn_fused_lstm_cell_backward_impl")
register_formula(_fused_cell_backward(10), "_thnn_fused_gru_cell_backward")
