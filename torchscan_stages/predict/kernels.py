"""Operators whose fake kernel allocates differently from the real one, and their corrections.

Found by ``benchmarks/audit_fake_kernels.py`` (real vs fake, small shapes; its table is in
docs/prediction.md):

* ``aten.mkldnn_rnn_layer`` (``nn.LSTM`` training on the CPU, oneDNN): the meta kernel
  returns a 0-byte workspace; the real one returns oneDNN's workspace, which autograd keeps
  until backward. Its size is oneDNN's (page-aligned parts), so it is read from the real
  kernel once per shape, run on zeros outside the fake mode (memoised); above
  ``PROBE_LIMIT`` input elements it is not probed and the result is partial.
* ``aten._grouped_mm`` (Mixture-of-Experts in transformers 5): the meta kernel accepts only
  bf16 in torch 2.13, though the CPU kernel runs fp32; the output's shape does not depend on
  the dtype, so the meta kernel is asked in bf16 and the output made in the real dtype
  (``analysis/operators/fallbacks.py``, shared with ``measure_flops`` on ``meta``).
* batch norm, forward and backward (``native_batch_norm`` and its variants): the CPU
  kernel allocates its output in the input's suggested memory format (contiguous for a
  transposed ``(B, C, L)`` input), the fake kernel in the input's own strides; the output
  is re-made in the CPU's layout (found by the audit's stride comparison), and a gradient
  ``output_mask`` did not ask for is not made.
* ``elu_backward``: the CPU kernel lays grad_input out like grad_output, the fake one like
  the forward's input; re-made like grad_output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false, suggest_memory_format
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..analysis.operators.fallbacks import grouped_mm

PROBE_LIMIT = 1 << 24  # input + weight elements of one probed RNN layer (64 MiB of fp32)
_aten = torch.ops.aten
_workspaces: dict[tuple[Any, ...], int] = {}


def _real_zeros(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.zeros(value.shape, dtype=value.dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_real_zeros(v) for v in value)
    return value


def _signature(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        (tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else repr(a) for a in args
    )


def rnn_workspace_bytes(args: tuple[Any, ...]) -> int | None:
    """oneDNN's workspace bytes for one ``mkldnn_rnn_layer`` call, or None if too big to probe."""
    key = (*_signature(args), torch.is_grad_enabled())
    if key in _workspaces:
        return _workspaces[key]
    elements = sum(a.numel() for a in args[:5] if isinstance(a, torch.Tensor))
    if elements > PROBE_LIMIT:
        return None
    with unset_fake_temporarily():  # grad mode kept: under no_grad oneDNN keeps no workspace
        out = _aten.mkldnn_rnn_layer.default(*_real_zeros(args))
    nbytes = out[3].untyped_storage().nbytes() if out[3] is not None else 0
    _workspaces[key] = nbytes
    return nbytes


Note = Callable[[str, str], None]  # (operator, message): a divergence left uncorrected


def _rnn_layer(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], note: Note) -> Any:
    out = func(*args, **kwargs)
    # not the ``train`` argument: the CPU kernel keeps a workspace whenever grad mode is on
    # (an eval-mode LSTM that is backpropagated through, as in Encodec), none under no_grad
    if out[3] is None or out[3].numel() != 0 or not torch.is_grad_enabled():
        return out
    nbytes = rnn_workspace_bytes(args)
    if nbytes is None:
        note(
            str(func),
            f"oneDNN's RNN workspace of a layer with more than {PROBE_LIMIT:,} input elements "
            "is not probed; the fake kernel counts it as 0 bytes, so the peak is a lower bound",
        )
        return out
    workspace = torch.empty(nbytes, dtype=torch.uint8, device=out[0].device)
    return (out[0], out[1], out[2], workspace)


def _grouped_mm(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], note: Note) -> Any:
    return grouped_mm(func, args, kwargs)  # shared with measure_flops/crawl_module on meta


def _in_suggested_layout(out: Any, like: torch.Tensor) -> Any:
    """``out`` (a fresh fake tensor, or None) re-made in ``like``'s suggested memory format,
    as the CPU kernel allocates it, when the fake kernel chose other strides."""
    if not isinstance(out, torch.Tensor) or not isinstance(like, torch.Tensor):
        return out
    layout = suggest_memory_format(like)
    expected = torch.empty(tuple(out.shape), device="meta", memory_format=layout).stride()
    if out.stride() == expected:
        return out
    return torch.empty(tuple(out.shape), dtype=out.dtype, device=out.device, memory_format=layout)


def _batch_norm(input_at: int) -> Callable[[Any, tuple[Any, ...], dict[str, Any], Note], Any]:
    backward = input_at == 1
    """CPU batch norm (forward and backward) allocates its output / grad_input with
    ``empty_like(input, input.suggest_memory_format())``: contiguous for a transposed
    (B, C, L) input, where the fake kernel keeps the input's strides. A later view of that
    output then copies (or not) in the real run as it does not in the fake one: 0.79x on a
    BatchNorm over a transposed input followed by a Linear (PatchTST), before this. The
    backward's fake kernel also makes a grad_input that ``output_mask`` did not ask for (an
    input that needs no gradient), which the CPU kernel never allocates."""

    def correct(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], note: Note) -> Any:
        out = func(*args, **kwargs)
        like = args[input_at] if len(args) > input_at else kwargs.get("input")
        if not isinstance(out, (tuple, list)) or not isinstance(like, torch.Tensor):
            return out
        if like.device.type != "cpu":
            return out
        out = (_in_suggested_layout(out[0], like), *out[1:])
        mask = args[9] if backward and len(args) > 9 else None
        if isinstance(mask, (list, tuple)) and len(mask) == len(out):
            # the fake kernel makes every gradient; the CPU kernel only those asked for
            out = tuple(item if wanted else None for item, wanted in zip(out, mask, strict=True))
        return out

    return correct


def _elu_backward(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], note: Note) -> Any:
    """The CPU kernel (TensorIterator) lays grad_input out like grad_output, the first
    input; the fake kernel like ``self_or_result``, the last (Encodec's ELU on a permuted
    activation). Re-made in grad_output's layout when that one is dense."""
    out = func(*args, **kwargs)
    grad = args[0] if args else kwargs.get("grad_output")
    if not isinstance(out, torch.Tensor) or not isinstance(grad, torch.Tensor):
        return out
    if grad.shape != out.shape or not is_non_overlapping_and_dense_or_false(grad):
        return out
    if grad.device.type != "cpu" or out.stride() == grad.stride():
        return out
    return torch.empty_strided(tuple(out.shape), grad.stride(), dtype=out.dtype, device=out.device)


_BATCH_NORM_FORWARD = (
    _aten.native_batch_norm.default, _aten._native_batch_norm_legit.default,
    _aten._native_batch_norm_legit.no_stats, _aten._native_batch_norm_legit_no_training.default,
    _aten._native_batch_norm_legit_functional.default, _aten._batch_norm_with_update.default,
    _aten._batch_norm_no_update.default,
)  # fmt: skip
_BATCH_NORM_BACKWARD = (_aten.native_batch_norm_backward.default, _aten.batch_norm_backward.default)

CORRECTED: dict[Any, Callable[[Any, tuple[Any, ...], dict[str, Any], Note], Any]] = {
    _aten.mkldnn_rnn_layer.default: _rnn_layer,
    _aten._grouped_mm.default: _grouped_mm,
    **dict.fromkeys(_BATCH_NORM_FORWARD, _batch_norm(0)),
    **dict.fromkeys(_BATCH_NORM_BACKWARD, _batch_norm(1)),
    _aten.elu_backward.default: _elu_backward,
}
