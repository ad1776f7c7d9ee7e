"""Normalisation layers: batch, layer, group, instance (as batch/group norm), RMS.

Convention, per element of the input: computing statistics costs 4 (mean: 1; variance:
subtract, square, accumulate: 3), RMS statistics 2 (square, accumulate); normalising costs 2
(subtract mean, multiply by 1/std; RMS: 1); the affine transform 1 per present weight/bias.
Evaluation-mode batch norm uses running statistics (no statistics cost). Updating running
statistics costs 4 per channel. Backward: grad_input 8 per element (2 with running
statistics), grad_weight 2 per element, grad_bias 1 per element, as requested by output_mask.
Weight normalisation (``weight_norm``, as in wav2vec2's positional convolution): 3 per
weight element + 2 per norm; its backward 5 per weight element + 3 per norm.
"""

from __future__ import annotations

from typing import Any

from ._registry import arg, convention, numel, register_formula

convention(
    "norms",
    "per input element: statistics 4 (RMS 2), normalise 2 (RMS 1), +1 per present "
    "weight and bias; running-statistics update 4 per channel; backward: grad_input 8 "
    "(2 with running statistics), grad_weight 2, grad_bias 1; weight norm 3 per weight "
    "element + 2 per norm (backward 5 + 3)",
)

STATS, RMS_STATS, NORMALISE, RMS_NORMALISE = 4, 2, 2, 1
GRAD_INPUT, GRAD_INPUT_FROZEN, GRAD_WEIGHT, GRAD_BIAS = 8, 2, 2, 1


def _affine(*tensors: Any) -> int:
    """How many of weight and bias are present (a loop: no generator on a per-operator path)."""
    present = 0
    for tensor in tensors:
        if tensor is not None:
            present += 1
    return present


def norm_forward_flops(
    elements: int, *, stats: bool, affine: int, channels: int = 0, update: bool = False
) -> int:
    """Forward FLOPs of a (batch/layer/group) norm over ``elements`` input elements."""
    flops = elements * ((STATS if stats else 0) + NORMALISE + affine)
    return flops + (4 * channels if update else 0)


def _batch_norm(training: bool | None, update: bool) -> Any:
    """Builds a formula; ``training=None`` reads it from the ``training`` argument (index 5)."""

    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        x = args[0]
        weight, bias = arg(args, kwargs, 1, "weight", None), arg(args, kwargs, 2, "bias", None)
        running = arg(args, kwargs, 3, "running_mean", None)
        if isinstance(running, bool):  # _native_batch_norm_legit.no_stats: (.., training, ..)
            is_training, running = running, None
        elif training is None:
            is_training = bool(arg(args, kwargs, 5, "training", False))
        else:
            is_training = training
        channels = x.shape[1] if x.dim() > 1 else 0
        return norm_forward_flops(
            x.numel(),
            stats=is_training,
            affine=_affine(weight, bias),
            channels=channels,
            update=update and is_training and running is not None,
        )

    return count


register_formula(_batch_norm(None, True), "native_batch_norm", "_native_batch_norm_legit")
register_formula(_batch_norm(False, False), "_native_batch_norm_legit_no_training")
register_formula(
    _batch_norm(True, True), "_batch_norm_with_update", "_batch_norm_with_update_functional"
)


def _batch_norm_no_update(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """Evaluation batch norm; without running stats it normalises with batch statistics."""
    x = args[0]
    running = arg(args, kwargs, 3, "running_mean", None)
    affine = _affine(arg(args, kwargs, 1, "weight", None), arg(args, kwargs, 2, "bias", None))
    return norm_forward_flops(x.numel(), stats=running is None, affine=affine)


register_formula(_batch_norm_no_update, "_batch_norm_no_update")


def _layer_norm(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    affine = _affine(arg(args, kwargs, 2, "weight", None), arg(args, kwargs, 3, "bias", None))
    return norm_forward_flops(numel(args[0]), stats=True, affine=affine)


def _group_norm(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    affine = _affine(arg(args, kwargs, 1, "weight", None), arg(args, kwargs, 2, "bias", None))
    return norm_forward_flops(numel(args[0]), stats=True, affine=affine)


def _rms_norm(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    affine = _affine(arg(args, kwargs, 2, "weight", None))
    return numel(args[0]) * (RMS_STATS + RMS_NORMALISE + affine)


register_formula(_layer_norm, "native_layer_norm")
register_formula(_group_norm, "native_group_norm")
register_formula(_rms_norm, "_fused_rms_norm")


def norm_backward_flops(elements: int, mask: Any, *, frozen_stats: bool = False) -> int:
    mask = list(mask) if mask is not None else [True, True, True]
    mask += [False] * (3 - len(mask))
    grad_input = GRAD_INPUT_FROZEN if frozen_stats else GRAD_INPUT
    return elements * (
        grad_input * bool(mask[0]) + GRAD_WEIGHT * bool(mask[1]) + GRAD_BIAS * bool(mask[2])
    )


def _batch_norm_backward(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    # (grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, ...)
    train = bool(arg(args, kwargs, 7, "train", True))
    mask = arg(args, kwargs, 9, "output_mask", None)
    return norm_backward_flops(numel(args[1]), mask, frozen_stats=not train)


def _batch_norm_backward_update(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    # batch_norm_backward(grad_out, input, weight, rm, rv, save_mean, save_var, update, eps, mask,
    # reserve): ``update`` is the training flag.
    update = bool(arg(args, kwargs, 7, "update", True))
    mask = arg(args, kwargs, 9, "output_mask", None)
    return norm_backward_flops(numel(args[1]), mask, frozen_stats=not update)


def _layer_norm_backward(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    return norm_backward_flops(numel(args[1]), arg(args, kwargs, 7, "output_mask", None))


def _group_norm_backward(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    return norm_backward_flops(numel(args[1]), arg(args, kwargs, 9, "output_mask", None))


def _rms_norm_backward(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    mask = arg(args, kwargs, 5, "output_mask", None)
    mask = [*list(mask), False] if mask is not None else None
    return norm_backward_flops(numel(args[1]), mask)


register_formula(_batch_norm_backward, "native_batch_norm_backward")
register_formula(_batch_norm_backward_update, "batch_norm_backward")
register_formula(_layer_norm_backward, "native_layer_norm_backward")
register_formula(_group_norm_backward, "native_group_norm_backward")
register_formula(_rms_norm_backward, "_fused_rms_norm_backward")


def _weight_norm(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """_weight_norm_interface(v, g, dim): w = v * g / ||v|| over each slice along ``dim``.

    The norm as a vector norm (2 per element of v, +1 per norm for the root), the scale
    g / ||v|| (1 per norm), the multiply (1 per element): 3 per element + 2 per norm.
    """
    return 3 * numel(args[0]) + 2 * numel(args[1])


def _weight_norm_backward(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """_weight_norm_interface_backward(grad_w, v, g, norms, dim): grad_g = sum(grad_w * v) /
    ||v|| (2 per element + 1 per norm); grad_v = g / ||v|| * (grad_w - v * grad_g / ||v||)
    (3 per element + 2 per norm): 5 per element + 3 per norm."""
    return 5 * numel(args[1]) + 3 * numel(args[2])


register_formula(_weight_norm, "_weight_norm_interface")
register_formula(_weight_norm_backward, "_weight_norm_interface_backward")
