"""Quantized and weight-packed matrix products: dynamic int8, weight-only int8/int4.

Convention: the products are the float products' 2 FLOPs per multiply-add, whatever the
storage dtype (``_scaled_mm``'s fp8 product is torch's own formula, unchanged). The rest:
quantising or dequantising a value is a dtype conversion, 0 FLOPs as every cast here; a
per-output-channel rescale is 1 multiply per output element (weight-only int8); int4's
per-group dequantisation of the packed weight, ``(w - zero) * scale``, 2 per weight
element; bias adds 1 per output element; the dynamic LSTM's gates as the float LSTM's
(``rnn.py``).
"""

from __future__ import annotations

from typing import Any

from ._registry import Flops, convention, formula, numel, shape
from .rnn import layer_flops

convention(
    "quantized",
    "quantized/packed products: 2 FLOPs per multiply-add as the float product; quantise/"
    "dequantise casts 0; int8 weight-only per-channel rescale 1 per output; int4 group "
    "dequantisation 2 per weight element; bias 1 per output; dynamic LSTM as rnn",
)


@formula("linear_dynamic", "linear_relu_dynamic", namespace="quantized", products="split")
def linear_dynamic(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Flops:
    """quantized::linear_dynamic(X, W_prepack): 2 * rows * in * out products, + 1 per output
    element for the bias when the packed weight has one (read through ``unpack()``)."""
    x = args[0]
    fan_in, fan_out = int(x.shape[-1]), int(out.shape[-1])
    rows = numel(x) // fan_in if fan_in else 0
    bias = args[1].unpack()[1] if hasattr(args[1], "unpack") else None
    return Flops(2 * rows * fan_in * fan_out, rows * fan_out if bias is not None else 0)


@formula("quantized_lstm", products="split")
def quantized_lstm(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Flops:
    """aten.quantized_lstm.input(input, hx, params, has_biases, num_layers, dropout, train,
    bidirectional, batch_first) / .data(data, batch_sizes, hx, ...): sizes read from the
    input and the hidden state (the packed cell parameters are opaque)."""
    offset = 0 if isinstance(args[3], bool) else 1
    x, hx = args[0], args[1 + offset]
    bias, layers = bool(args[3 + offset]), int(args[4 + offset])
    directions = 2 if bool(args[7 + offset]) else 1
    hidden = int(shape(hx[0])[-1])
    input_size = int(shape(x)[-1])
    rows = numel(x) // input_size
    total = Flops(0, 0)
    for layer in range(layers):
        size = input_size if layer == 0 else hidden * directions
        for _ in range(directions):
            total = total + layer_flops(rows, size, hidden, 4 * hidden, "lstm", bias=bias)
    return total


@formula("_weight_int8pack_mm", products="split")
def weight_int8pack_mm(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Flops:
    """_weight_int8pack_mm(x (M, K), w int8 (N, K), scales (N)): 2MKN + MN rescales."""
    k = int(shape(args[0])[-1])
    m, n = numel(args[0]) // k, int(shape(args[1])[0])
    return Flops(2 * m * k * n, m * n)


def _int4(args: tuple[Any, ...], out: Any) -> Flops:
    """x (M, K) against a packed int4 (N, K) weight: 2MKN + 2NK group dequantisation."""
    k = int(shape(args[0])[-1])
    m, n = numel(args[0]) // k, int(shape(out)[-1])
    return Flops(2 * m * k * n, 2 * n * k)


@formula("_weight_int4pack_mm", "_weight_int4pack_mm_for_cpu", products="split")
def weight_int4pack_mm(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Flops:
    """_weight_int4pack_mm[_for_cpu](x, packed w, group size, scales and zeros)."""
    return _int4(args, out)


@formula("_weight_int4pack_mm_with_scales_and_zeros", products="split")
def weight_int4pack_mm_scales(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Flops:
    """_weight_int4pack_mm_with_scales_and_zeros(x, packed w, group size, scales, zeros)."""
    return _int4(args, out)
