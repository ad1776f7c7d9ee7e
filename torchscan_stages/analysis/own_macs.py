"""Own MACs of a module without a handler, read from the operators its forward ran.

Two rules (both need every own operator counted by a built-in formula):
* only MAC-free operators (a residual add, an activation, pooling, softmax, a reduction; an
  element-wise multiply with nothing to accumulate it into): exactly 0 MACs;
* otherwise, when every formula's tensor-product share is known and no operator belongs to
  a family whose module formula counts element-wise MACs (a norm's affine, interpolation
  weights, lerp/addcmul, weighted bags): the multiply-adds of the tensor products it ran
  (product FLOPs / 2), method ``operator_fill``. Element-wise multiplies and adds outside
  those families are FLOPs, not MACs. This is what recognises a state-space mixer, an
  attention variant or a recurrence doing its own products with no user code.
"""

from __future__ import annotations

from .module_formulas.upsample import UPSAMPLE_COST
from .operator_formulas.pooling import INTERPOLATION_FLOPS
from .operators import OwnerOps

# Operators that do no multiply-accumulate under the module formulas' conventions
# (activations, pooling and softmax modules have 0 MACs): a module running only these itself
# has exactly 0 own MACs. An allow-list, because a multiply hides MACs in many shapes (an
# affine x*g+b, a manual dot product, lerp, addcmul, linear upsampling, grid sampling).
MAC_FREE_OPERATORS = frozenset(
    f"aten.{name}"
    for name in (  # noqa: SIM905 (a word list reads better than 90 lines of strings)
        "add add_ sub sub_ rsub neg neg_ abs abs_ div div_ true_divide maximum minimum relu "
        "relu_ relu6 relu6_ clamp clamp_ clamp_min clamp_min_ clamp_max clamp_max_ hardtanh "
        "hardtanh_ threshold threshold_ leaky_relu leaky_relu_ elu elu_ selu selu_ celu "
        "celu_ gelu gelu_ silu silu_ sigmoid sigmoid_ tanh tanh_ hardswish hardswish_ "
        "hardsigmoid hardsigmoid_ mish mish_ softplus exp exp_ log log_ sqrt sqrt_ rsqrt "
        "rsqrt_ eq ne lt le gt ge logical_and logical_or logical_not max_pool1d max_pool2d "
        "max_pool3d max_pool2d_with_indices max_pool3d_with_indices avg_pool1d avg_pool2d "
        "avg_pool3d _adaptive_avg_pool2d _adaptive_avg_pool3d adaptive_avg_pool1d "
        "adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d mean sum amax amin max "
        "min _softmax _log_softmax all any bitwise_and bitwise_or bitwise_xor bitwise_not"
    ).split()
)
_PRODUCTS = frozenset({"aten.mul", "aten.mul_"})
_ACCUMULATING = frozenset(
    f"aten.{name}" for name in ("add", "add_", "sub", "sub_", "rsub", "sum", "mean")
)
# operators whose module-formula families count element-wise multiply-adds as MACs
_AFFINE_MACS = (
    *("layer_norm", "group_norm", "batch_norm", "rms_norm", "instance_norm", "upsample"),
    *("grid_sampler", "lerp", "addcmul", "addcdiv", "embedding_bag"),
)
# functional interpolation in a module's own forward: nn.Upsample's MACs per output element
# (upsample.py), read from the operator's FLOPs per output element (operator_formulas)
_INTERPOLATION_MACS = {
    f"aten.{name}": (INTERPOLATION_FLOPS[name], UPSAMPLE_COST[mode][1])
    for name, mode in (
        ("upsample_linear1d", "linear"),
        ("upsample_bilinear2d", "bilinear"),
        ("upsample_trilinear3d", "trilinear"),
        ("upsample_bicubic2d", "bicubic"),
    )
}


def macs_free(ops: OwnerOps) -> bool:
    """True when a module's own operators are known to do no multiply-accumulate.

    Every operator it ran itself must be counted by a built-in formula (no custom formula,
    nothing uncounted) and be on the allow-list: a residual ``add``, an activation, a
    pooling, a softmax or a plain reduction in a container's forward; or element-wise
    ``mul`` with no add, subtract or reduction beside it (nothing to accumulate a product
    into). Then the module's own MACs are exactly 0 even though its own FLOPs have no module
    formula.
    """
    if ops.uncounted_calls or ops.unclassified_calls:
        return False
    names = ops.counted_calls
    if all(name in MAC_FREE_OPERATORS for name in names):
        return True
    # element-wise products with nothing to accumulate them into (a gated MLP's act(g) * u,
    # a scaling by a constant): no multiply-accumulate either
    return all(n in MAC_FREE_OPERATORS or n in _PRODUCTS for n in names) and not any(
        n in _ACCUMULATING for n in names
    )


def products_known(ops: OwnerOps) -> bool:
    """Can the module's own MACs be read from its operators' tensor products?

    Every own operator must be counted by a formula whose product share is known, and none
    may be one whose module-formula family counts element-wise MACs (a norm's affine,
    interpolation weights, lerp/addcmul, weighted bags): there the product share alone would
    contradict that family's convention.
    """
    if not ops.complete or ops.unclassified_calls:
        return False
    return not any(
        marker in name
        for name in ops.counted_calls
        if name not in _INTERPOLATION_MACS
        for marker in _AFFINE_MACS
    )


def own_macs(ops: OwnerOps) -> int:
    """MACs of a module's own operators (when :func:`products_known`): the tensor products'
    multiply-adds, plus forward interpolation at nn.Upsample's MACs per output element."""
    macs = ops.product_flops // 2
    for name, (flops_per_output, macs_per_output) in _INTERPOLATION_MACS.items():
        flops = ops.op_flops.get(name, 0)
        macs += flops // flops_per_output * macs_per_output
    return macs
