"""Built-in module handlers for the layer classes Hugging Face ``transformers`` models use.

Loaded by the crawl the first time it meets a class defined in ``transformers`` (the package
never imports transformers itself). Each new transformers class is resolved once by its
family, read from the names along its MRO, so every model family built from the same layer
shapes (GPT-2, BERT, Llama, Mistral, Qwen2, Mixtral, Phi, Gemma, T5, ViT, Whisper, ...) is
covered without a table per model:

* ``Conv1D`` (GPT-2's transposed linear): as ``nn.Linear``.
* ``*RMSNorm`` and T5's ``T5LayerNorm`` (a weight, no bias, ``variance_epsilon``): RMSNorm.
* ``*RotaryEmbedding``: the cos/sin tables of the call's positions.
* activation classes (``NewGELUActivation``, ``GELUActivation``, ``SiLUActivation``, ...).
* ``*Attention`` classes: their own part is the two attention products (q @ k^T and
  scores @ v), read from the shapes of the products their forward ran (the crawl's operator
  record of the call, :meth:`CallContext.own_operators`), plus scaling and softmax per score;
  their projections are child modules with their own records.
* a family's own ``*LayerNorm`` / ``*RMSNormGated`` in Python (Cohere, Mamba2): the norm
  formula, mean-centred unless the call ran no subtraction, plus a gate's SiLU product.
* ``*GRN`` (ConvNeXt-V2's global response normalisation).
* MoE ``*TopKRouter`` / ``*Router`` (a 2-D ``weight``) and ``*Experts`` (3-D expert
  weights). The name alone never claims a class: a ``*Router`` or ``*Experts`` laid out
  differently (DBRX's router holds a ``Linear``, its experts a GLU child) gets no family
  handler, and its children and own operators are analysed instead.

Conventions are the module formulas' (``analysis/module_formulas``): one multiply-add = 2
FLOPs = 1 MAC, every elementary operation 1 FLOP, DMAs in elements.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..analysis.handlers import (
    HANDLERS,
    METHOD,
    SCOPE,
    CallContext,
    ModuleHandler,
    register_handler,
)
from ..analysis.module_formulas._common import first_tensor, in_out, param_numel, pointwise_rf
from ..analysis.module_formulas.activation import GELU_TANH_FLOPS
from ..analysis.module_formulas.linear import linear_cost
from ..analysis.module_formulas.norm import norm_cost
from ..report import MetricResult

# per-element FLOPs of transformers' activation classes (the convention of activation.py)
ACTIVATION_FLOPS: dict[str, int] = {
    "NewGELUActivation": GELU_TANH_FLOPS,  # tanh approximation, as nn.GELU('tanh')
    "GELUTanh": GELU_TANH_FLOPS,
    "PytorchGELUTanh": GELU_TANH_FLOPS,
    "FastGELUActivation": GELU_TANH_FLOPS,  # x*x, *c, +1, x*c, *, tanh, +1, 0.5x, *
    "AccurateGELUActivation": GELU_TANH_FLOPS,
    "GELUActivation": 5,  # as nn.GELU: divide, erf, add, 2 multiplies
    "ClippedGELUActivation": 7,  # GELU (5) + two clamps
    "QuickGELUActivation": 6,  # 1.702*x, sigmoid (4), multiply
    "SiLUActivation": 5,  # as nn.SiLU: sigmoid (4) + multiply
    "MishActivation": 5,  # as nn.Mish
    "ReLUSquaredActivation": 2,  # relu, square
    "LaplaceActivation": 6,  # subtract, divide, multiply, erf, add, multiply
    "SqrtSoftplusActivation": 7,  # softplus (6) + sqrt
    "LinearActivation": 0,  # identity
}


# ------------------------------------------------------------------------------- families


def conv1d(ctx: CallContext) -> dict[str, Any]:
    """GPT-2's Conv1D: ``addmm(bias, x, weight)`` with weight (in, out), as nn.Linear."""
    module: Any = ctx.module
    x, y = in_out(ctx)
    in_features, out_features = module.weight.shape
    rows = x.numel() // in_features
    flops, macs = linear_cost(rows, in_features, out_features, module.bias is not None)
    return {
        "module_flops": flops,
        "macs": macs,
        "dmas": x.numel() + param_numel(module) + y.numel(),
        **pointwise_rf(),
    }


def rms_norm(ctx: CallContext) -> dict[str, Any]:
    """RMSNorm with a weight and no bias (nn.RMSNorm's formula); Gemma's ``1 + weight`` adds
    one FLOP per weight element."""
    module: Any = ctx.module
    x, y = in_out(ctx)
    weight = module.weight
    groups = x.numel() // weight.numel()
    flops, macs = norm_cost(x.numel(), groups, data_stats=True, weight=True, bias=False, rms=True)
    if type(module).__name__.startswith("Gemma"):
        flops += weight.numel()
    return {
        "module_flops": flops,
        "macs": macs,
        "dmas": x.numel() + y.numel() + param_numel(module),
        **pointwise_rf(),
    }


def family_norm(ctx: CallContext) -> dict[str, Any]:
    """A family's own LayerNorm (Cohere) or gated RMSNorm (Mamba2), written out in Python.

    nn.LayerNorm's / nn.RMSNorm's formula (norm.py) over groups of ``group_size`` (else of
    the weight's size); mean-centred unless the call ran no subtraction (an RMS norm); a
    gate (second tensor argument) adds SiLU (5 per element) and its product (1 per element).
    """
    module: Any = ctx.module
    x, y = in_out(ctx)
    size = getattr(module, "group_size", None)
    size = size if isinstance(size, int) and size > 0 else module.weight.numel()
    own = ctx.own_operators()
    rms = "RMS" in type(module).__name__ or (own is not None and "aten.sub" not in own.operators)
    bias = isinstance(getattr(module, "bias", None), torch.Tensor)
    flops, macs = norm_cost(
        x.numel(), x.numel() // size, data_stats=True, weight=True, bias=bias, rms=rms
    )
    gate = ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("gate")
    if isinstance(gate, torch.Tensor):
        flops += 6 * x.numel()
    read = x.numel() + (gate.numel() if isinstance(gate, torch.Tensor) else 0)
    return {
        "module_flops": flops,
        "macs": macs,
        "dmas": read + y.numel() + param_numel(module),
        **pointwise_rf(),
    }


def _family_norm_fits(module: nn.Module) -> bool:
    """A Python norm with a ``weight`` (no nn.LayerNorm subclass: that has its handler)."""
    return isinstance(getattr(module, "weight", None), torch.Tensor) and not isinstance(
        module, (nn.LayerNorm, nn.GroupNorm)
    )


def rotary_embedding(ctx: CallContext) -> dict[str, Any]:
    """cos/sin tables for the call's positions: (B, L, d) each.

    Frequencies: positions x inverse frequencies, d/2 per position (a product with inner
    size 1 when the forward runs it as a matmul, then 1 MAC each); cos and sin: 1 FLOP per
    element each; scaling both by ``attention_scaling``: 1 FLOP per element each.
    """
    cos = first_tensor(ctx.output)
    if cos is None:
        raise TypeError(f"{type(ctx.module).__name__} returned no tensor")
    inv_freq = int(getattr(ctx.module, "inv_freq").numel())  # noqa: B009 (a buffer)
    positions = cos.numel() // cos.shape[-1]
    frequencies = positions * inv_freq
    own = ctx.own_operators()
    macs = frequencies if own is not None and own.product_flops > 0 else 0
    flops = frequencies * (2 if macs else 1) + 4 * cos.numel()
    outputs = sum(t.numel() for t in ctx.output if isinstance(t, torch.Tensor))
    return {
        "module_flops": flops,
        "macs": macs,
        "dmas": positions + inv_freq + outputs,
    }


def activation(ctx: CallContext) -> dict[str, Any]:
    x, y = in_out(ctx)
    per_element = _activation_flops(type(ctx.module))
    assert per_element is not None
    return {
        "module_flops": per_element * x.numel(),
        "macs": 0,
        "dmas": x.numel() + y.numel(),
        **pointwise_rf(),
    }


def _activation_flops(module_type: type) -> int | None:
    for cls in module_type.__mro__:
        if cls.__name__ in ACTIVATION_FLOPS and cls.__module__.startswith("transformers."):
            return ACTIVATION_FLOPS[cls.__name__]
    return None


def _head_dim(module: nn.Module) -> int | None:
    for name in ("head_dim", "attention_head_size", "key_value_proj_dim", "head_size"):
        value = getattr(module, name, None)
        if isinstance(value, int) and value > 0:
            return value
    heads = _first_int(module, ("num_heads", "num_attention_heads", "n_heads", "n_head"))
    width = _first_int(module, ("embed_dim", "hidden_size", "all_head_size", "dim", "inner_dim"))
    if heads and width and width % heads == 0:
        return width // heads
    return None


def _first_int(module: nn.Module, names: tuple[str, ...]) -> int | None:
    config = getattr(module, "config", None)
    for owner in (module, config):
        for name in names:
            value = getattr(owner, name, None) if owner is not None else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def attention(ctx: CallContext) -> dict[str, Any]:
    """An HF attention module's own part: its two products, scaling and softmax.

    MACs = the products' multiply-adds, read from the shapes of the products the forward ran
    (q @ k^T and scores @ v; with equal head sizes each is scores x head_dim). FLOPs = 2 x MACs
    + 1 per score (scaling) + 5 per score (softmax) + 1 per score when a mask tensor is passed.
    Projections are child modules; position-bias bucketing (T5) and rotary application are
    index and element arithmetic the formula does not count. DMAs are unavailable: the
    operands of the products are not kept.
    """
    own = ctx.own_operators()
    if own is None or own.product_flops == 0:
        return {
            "module_flops": None,
            "macs": None,
            "dmas": None,
            "diagnostics": [
                f"{type(ctx.module).__name__} at {ctx.path or '<root>'} ran no attention "
                "product in its own forward; its own part is unavailable"
            ],
        }
    macs_value = own.product_flops // 2
    exact = own.complete and own.products_known
    head_dim = _head_dim(ctx.module)
    result: dict[str, Any] = {"dmas": None}
    if not exact:
        result["macs"] = MetricResult.partial(macs_value, unit="MACs", scope=SCOPE, method=METHOD)
        result["module_flops"] = MetricResult.partial(
            2 * macs_value, unit="FLOPs", scope=SCOPE, method=METHOD
        )
        return result
    result["macs"] = macs_value
    if head_dim is None:
        result["module_flops"] = MetricResult.partial(
            2 * macs_value, unit="FLOPs", scope=SCOPE, method=METHOD
        )
        return result
    # multi-head latent attention (DeepSeek-V2/V3) scores with qk_head_dim and mixes values
    # of v_head_dim: each score costs their sum in multiply-adds; else 2 x head_dim
    qk, v = getattr(ctx.module, "qk_head_dim", None), getattr(ctx.module, "v_head_dim", None)
    per_score = qk + v if isinstance(qk, int) and isinstance(v, int) else 2 * head_dim
    scores = macs_value // per_score
    masked = isinstance(ctx.kwargs.get("attention_mask"), torch.Tensor)
    result["module_flops"] = 2 * macs_value + scores * (6 + (1 if masked else 0))
    return result


def grn(ctx: CallContext) -> dict[str, Any]:
    """ConvNeXt-V2's global response normalisation on channels-last x (B, H, W, C).

    Per (B, C): the spatial L2 norm (square + accumulate 2 per element, 1 sqrt); its mean
    over channels (1 add per channel, 1 divide and 1 eps add per sample); normalising (1
    divide per (B, C)); then ``weight * (x * n) + bias + x``: 4 per element, of which the
    affine multiply-add is 1 MAC per element (the norm convention). DMAs: input, output and
    the two (C,) parameters.
    """
    module: Any = ctx.module
    x, y = in_out(ctx)
    n, batch, channels = x.numel(), x.shape[0], x.shape[-1]
    flops = 2 * n + batch * channels + (batch * channels + 2 * batch) + batch * channels + 4 * n
    return {
        "module_flops": flops,
        "macs": n,
        "dmas": x.numel() + y.numel() + param_numel(module),
        **pointwise_rf(),
    }


def _grn_fits(module: nn.Module) -> bool:
    """GRN's formula reads a channels-last (1, 1, 1, C) ``weight`` and ``bias``."""
    weight, bias = getattr(module, "weight", None), getattr(module, "bias", None)
    return all(
        isinstance(t, torch.Tensor) and t.dim() == 4 and t.shape[:3] == (1, 1, 1)
        for t in (weight, bias)
    )


def router(ctx: CallContext) -> dict[str, Any]:
    """An MoE router: logits (rows x experts, 1 MAC per weight element per row), softmax (5
    per logit), top-k selection (1 compare per logit) and renormalising the k chosen weights
    (1 add + 1 divide each)."""
    module: Any = ctx.module
    x = first_tensor(ctx.args) if ctx.args else first_tensor(ctx.kwargs)
    if x is None:
        raise TypeError(f"{type(module).__name__} call without a tensor input")
    experts, width = module.weight.shape
    rows = x.numel() // width
    top_k = int(getattr(module, "top_k", 0) or 0)
    macs = rows * experts * width
    flops = 2 * macs + rows * experts * 6 + rows * top_k * 2
    outputs = ctx.output if isinstance(ctx.output, tuple) else (ctx.output,)
    written = sum(t.numel() for t in outputs if isinstance(t, torch.Tensor))
    return {
        "module_flops": flops,
        "macs": macs,
        "dmas": x.numel() + module.weight.numel() + written,
    }


def experts(ctx: CallContext) -> dict[str, Any]:
    """MoE experts with 3-D weights (one matrix per expert), for the routed rows only.

    Routed rows S = tokens x top_k. MACs = S x (elements of one expert's up (or gate_up)
    matrix + one expert's down matrix). FLOPs = 2 x MACs + biases (1 per output element)
    + the gate product act(gate) * up (1 per intermediate element, gated experts) + weighting
    each routed output (1 per element) + summing them into the tokens (1 per element). The
    activation is a child module with its own record.
    """
    module: Any = ctx.module
    hidden, top_k_index = ctx.args[0], ctx.args[1]
    routed = top_k_index.numel()
    gated = hasattr(module, "gate_up_proj")
    up = module.gate_up_proj if gated else module.up_proj
    down = module.down_proj
    up_size, down_size = up[0].numel(), down[0].numel()
    hidden_dim = hidden.shape[-1]
    up_out = up_size // hidden_dim
    macs = routed * (up_size + down_size)
    flops = 2 * macs + routed * (up_out // 2 if gated else 0) + 2 * routed * hidden_dim
    if getattr(module, "has_bias", False):
        flops += routed * (up_out + hidden_dim)
    output = first_tensor(ctx.output)
    written = output.numel() if output is not None else 0
    # hidden states, routing indices and weights read; every expert matrix read; output written
    dmas = hidden.numel() + 2 * routed + param_numel(module) + written
    return {"module_flops": flops, "macs": macs, "dmas": dmas}


# ----------------------------------------------------------------------------- resolution


def _names(module_type: type) -> list[str]:
    return [
        cls.__name__ for cls in module_type.__mro__ if cls.__module__.startswith("transformers.")
    ]


# children that mark the module running the attention products itself (not a wrapper)
_PROJECTIONS = frozenset(
    [
        "q_proj",
        "query",
        "c_attn",
        "q",
        "q_lin",
        "qkv_proj",
        "qkv",
        "Wqkv",
        "query_key_value",
        "in_proj",
        "q_a_proj",  # multi-head latent attention (DeepSeek-V2/V3): low-rank queries
        "kv_a_proj_with_mqa",  # and the shared compressed keys/values
    ]
)


def family_of(
    module_type: type, module: nn.Module | None = None
) -> tuple[str, Callable[[CallContext], dict[str, Any]]] | None:
    """(family, formula) of a transformers class, or None when no family fits.

    ``module`` (an instance) tells an attention module that projects its own queries from a
    wrapper class of the same name pattern (BertAttention, T5LayerSelfAttention).
    """
    names = _names(module_type)
    if not names:
        return None
    if "Conv1D" in names:
        return "Conv1D", conv1d
    if _activation_flops(module_type) is not None:
        return "activation", activation
    last = names[0]
    if any(n.endswith("RMSNorm") for n in names) or last == "T5LayerNorm":
        return "RMSNorm", rms_norm
    if last.endswith(("LayerNorm", "RMSNormGated")) and _fits(_family_norm_fits, module):
        return "family norm", family_norm
    if any(n.endswith("RotaryEmbedding") for n in names) and _fits(_rotary_fits, module):
        return "RotaryEmbedding", rotary_embedding
    if last.endswith("GRN") and _fits(_grn_fits, module):
        return "global response norm", grn
    if any(n.endswith(("TopKRouter", "Router")) for n in names) and _fits(_router_fits, module):
        return "MoE router", router
    if any(n.endswith("Experts") for n in names) and _fits(_experts_fits, module):
        return "MoE experts", experts
    projects = module is not None and bool(_PROJECTIONS & set(module._modules))
    if projects and any(n.endswith("Attention") for n in names):
        return "attention", attention
    return None


def _router_fits(module: nn.Module) -> bool:
    """The router formula reads a (experts, width) ``weight`` it multiplies itself."""
    weight = getattr(module, "weight", None)
    return isinstance(weight, torch.Tensor) and weight.dim() == 2


def _experts_fits(module: nn.Module) -> bool:
    """The experts formula reads 3-D ``gate_up_proj`` (or ``up_proj``) and ``down_proj``
    weights (one matrix per expert) and is called with (hidden, top_k_index, ...): Llama-4's
    experts, called with the routed hidden states alone, do not fit."""
    up = getattr(module, "gate_up_proj", None)
    up = up if up is not None else getattr(module, "up_proj", None)
    down = getattr(module, "down_proj", None)
    if not all(isinstance(t, torch.Tensor) and t.dim() == 3 for t in (up, down)):
        return False
    parameters = inspect.signature(type(module).forward).parameters
    return len(parameters) >= 3  # self, hidden_states, top_k_index


def _rotary_fits(module: nn.Module) -> bool:
    """The rotary formula reads one ``inv_freq`` buffer (Gemma-3 and ModernBERT keep one
    per attention type, under other names)."""
    return isinstance(getattr(module, "inv_freq", None), torch.Tensor)


def _fits(check: Callable[[nn.Module], bool], module: nn.Module | None) -> bool:
    return module is None or check(module)


ROUTER_EXPECTS = "a 2-D `weight` (experts, width) and a tensor input of width `width`"
EXPERTS_EXPECTS = (
    "3-D `gate_up_proj` or `up_proj` and `down_proj` weights (one matrix per expert), "
    "called as forward(hidden_states, top_k_index, top_k_weights)"
)
_STRUCTURE: dict[str, tuple[Callable[[nn.Module], bool], str]] = {
    "router": (_router_fits, ROUTER_EXPECTS),
    "experts": (_experts_fits, EXPERTS_EXPECTS),
    "family_norm": (_family_norm_fits, "a `weight` tensor and a tensor input to normalise"),
    "rotary_embedding": (_rotary_fits, "an `inv_freq` buffer and a (cos, sin) output"),
    "grn": (_grn_fits, "channels-last input (B, H, W, C) and (1, 1, 1, C) weight and bias"),
}

_resolved: set[type] = set()


def register_transformers_class(module: nn.Module) -> ModuleHandler | None:
    """Register the family handler of ``type(module)`` once (None when none fits)."""
    module_type = type(module)
    if module_type in _resolved:
        return HANDLERS.get(module_type)
    _resolved.add(module_type)
    found = family_of(module_type, module)
    if found is None or module_type in HANDLERS:
        return HANDLERS.get(module_type)
    family, formula = found
    accepts, expects = _STRUCTURE.get(formula.__name__, (None, None))
    label = f"hf_handlers.{formula.__name__} ({family})"
    register_handler(module_type, name=label, accepts=accepts, expects=expects)(formula)
    return HANDLERS[module_type]


__all__ = ["ACTIVATION_FLOPS", "family_of", "register_transformers_class"]
