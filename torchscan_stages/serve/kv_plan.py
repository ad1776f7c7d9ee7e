"""``kv_cache_plan``: how many sequences of a given context fit in a device beside the weights.

The closed form: ``weights + n * per_sequence(context) + reserve <= capacity``, where
``per_sequence`` is the KV cache of one sequence from the model's own attention layout
(kv_layout: GQA heads, sliding windows, latent caches, layers without a cache) plus a
recurrent state the caller sizes. ``max_sequences`` is the largest such n; ``max_context``
the largest context at ``batch_size`` sequences (at most the model's position limit).

The answer is checked, not only computed: ``predict_peak_memory`` (fake tensors, the CUDA
allocator's 512-byte blocks) predicts a hand-written decode step at ``max_sequences`` and at
one more: the weights, every layer's cache at that batch and context, the new token's
keys and values written into the cache in place, each layer's attention over it, and the
logits. ``confirmed`` is True when the first fits the capacity and the second does not. The
step's activations and the allocator's rounding come out of ``reserve_bytes``; when they do
not fit in it, ``confirmed`` is False and a diagnostic gives the predicted peak.
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn
from torch.nn import functional

from ..predict import predict_peak_memory
from ..predict.allocator import allocator_model
from ..report import Diagnostic, MetricResult
from .kv_layout import CacheLayout, read_layout

METHOD = "closed_form_from_config"
QUANTIZED_CACHE_DTYPES = (torch.int8, torch.uint8)
MAX_SEARCH_CONTEXT = 1 << 40  # a model without a position limit: search this far


@dataclass(frozen=True)
class KVCheck:
    """One predicted decode step: its batch, its predicted peak, and whether it fits."""

    batch: int
    predicted_peak: MetricResult
    fits: bool | None


@dataclass(frozen=True)
class KVCachePlan:
    """The plan, each number a MetricResult; ``checks`` at ``max_sequences`` and one more."""

    layout: CacheLayout
    capacity_bytes: int
    context_len: int
    dtype: str
    batch_size: int
    reserve_bytes: int
    weight_bytes: MetricResult
    kv_bytes_per_sequence: MetricResult
    max_sequences: MetricResult
    max_context: MetricResult
    checks: tuple[KVCheck, ...]
    confirmed: bool | None
    diagnostics: tuple[Diagnostic, ...]


def kv_cache_plan(
    model_or_config: Any,
    capacity_bytes: int,
    context_len: int,
    dtype: torch.dtype = torch.bfloat16,
    *,
    batch_size: int = 1,
    reserve_bytes: int = 0,
    state_bytes_per_sequence: int | None = None,
    device: str = "cuda",
) -> KVCachePlan:
    """The largest number of ``context_len``-token sequences whose KV cache fits in
    ``capacity_bytes`` beside the weights (both in ``dtype``), and the largest context for
    ``batch_size`` sequences; checked by predicting a decode step at that batch and one more.

    ``model_or_config``: an HF causal LM (its parameters are the weights) or its config
    (the weights counted on a model built on the ``meta`` device). ``reserve_bytes``: what
    the step needs besides weights and cache (activations, workspaces). A model with
    recurrent layers needs ``state_bytes_per_sequence``; without it the counts are unavailable.
    """
    _check_arguments(capacity_bytes, context_len, dtype, batch_size, reserve_bytes)
    allocator_model(str(device))  # a device no allocator model covers: refused before work
    if state_bytes_per_sequence is not None:
        _check_int("state_bytes_per_sequence", state_bytes_per_sequence, 0)
    config, where = _config_of(model_or_config)
    layout = read_layout(config, where)
    itemsize = torch.empty((), dtype=dtype).element_size()
    weight_numel = _weight_numel(model_or_config, config, where)
    plan = _Plan(layout, weight_numel * itemsize, capacity_bytes - reserve_bytes, itemsize)
    diagnostics: list[Diagnostic] = []
    state = state_bytes_per_sequence
    sequences: int | None = None
    longest: int | None = None
    checks: tuple[KVCheck, ...] = ()
    if layout.recurrent_layers and state is None:
        diagnostics.append(_recurrent_diagnostic(layout))
    else:
        sequences = plan.max_sequences(context_len, state or 0, diagnostics)
        longest = plan.max_context(batch_size, state or 0, diagnostics)
    if sequences is not None:
        step = _DecodeStep(layout, weight_numel, context_len, dtype, state or 0)
        checks = tuple(
            _predict(step, batch, capacity_bytes, device)
            for batch in ((sequences, sequences + 1) if sequences else (1,))
        )
    scope = f"context_{context_len}"
    return KVCachePlan(
        layout=layout,
        capacity_bytes=capacity_bytes,
        context_len=context_len,
        dtype=str(dtype),
        batch_size=batch_size,
        reserve_bytes=reserve_bytes,
        weight_bytes=MetricResult.complete(
            plan.weights, unit="bytes", scope="weights", method=METHOD
        ),
        kv_bytes_per_sequence=MetricResult.complete(
            plan.kv_bytes(context_len),
            unit="bytes",
            scope=f"kv_cache_per_sequence_{scope}",
            method=METHOD,
        ),
        max_sequences=_count(sequences, "sequences", scope),
        max_context=_count(longest, "tokens", f"max_context_at_batch_{batch_size}"),
        checks=checks,
        confirmed=_confirmed(checks, sequences, reserve_bytes, diagnostics),
        diagnostics=tuple(diagnostics),
    )


def _count(value: int | None, unit: str, scope: str) -> MetricResult:
    if value is None:
        return MetricResult.unavailable(unit=unit, scope=scope, method=METHOD)
    return MetricResult.complete(value, unit=unit, scope=scope, method=METHOD)


@dataclass(frozen=True)
class _Plan:
    """The closed forms over one layout, weights and budget (capacity - reserve)."""

    layout: CacheLayout
    weights: int
    budget: int
    itemsize: int

    def kv_bytes(self, context_len: int) -> int:
        return self.layout.elements_per_sequence(context_len) * self.itemsize

    def free(self) -> int:
        return self.budget - self.weights

    def max_sequences(self, context_len: int, state: int, found: list[Diagnostic]) -> int | None:
        per_sequence = self.kv_bytes(context_len) + state
        if self.free() < 0:
            found.append(_weights_diagnostic(self.weights, self.budget))
            return 0
        if per_sequence == 0:
            found.append(_unbounded_diagnostic("sequences"))
            return None
        return self.free() // per_sequence

    def max_context(self, batch: int, state: int, found: list[Diagnostic]) -> int | None:
        """The largest context whose ``batch`` sequences fit: per-sequence bytes never fall
        as the context grows, so a bisection over [0, the position limit] finds it."""

        def fits(context: int) -> bool:
            return self.weights + batch * (self.kv_bytes(context) + state) <= self.budget

        high = self.layout.max_positions or MAX_SEARCH_CONTEXT
        if not fits(0):
            return 0
        if fits(high):
            if self.layout.max_positions is None:
                found.append(_unbounded_diagnostic("tokens"))
                return None
            found.append(_position_limit_diagnostic(high))
            return high
        low = 0  # fits(low), not fits(high)
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if fits(middle) else (low, middle)
        return low


class _DecodeStep:
    """A decode step of the layout, written by hand for ``predict_peak_memory``: built inside
    the workload (fake: no memory), so the predicted peak holds weights, cache and step."""

    def __init__(
        self, layout: CacheLayout, weights: int, context: int, dtype: torch.dtype, state: int
    ) -> None:
        self.layout, self.weights, self.context = layout, weights, context
        self.dtype, self.state = dtype, state

    def __call__(self, batch: int) -> None:
        layout, dtype = self.layout, self.dtype
        weights = torch.empty(self.weights, dtype=dtype)
        state = torch.empty(batch, self.state, dtype=torch.uint8) if self.state else None
        caches = [self._cache(batch, layer.tokens_held(self.context), layer.elements_per_token)
                  for layer in layout.layers if layer.tokens_held(self.context)]  # fmt: skip
        for cache in caches:
            self._attend(batch, cache)
        if layout.vocab_size:  # the logits, in float32 as samplers read them
            torch.empty(batch, layout.vocab_size, dtype=torch.float32).softmax(-1)
        del weights, state, caches

    def _cache(self, batch: int, held: int, per_token: int) -> tuple[torch.Tensor, ...]:
        layout, dtype = self.layout, self.dtype
        if layout.latent_rank is not None:
            return (torch.empty(batch, held, per_token, dtype=dtype),)
        return (
            torch.empty(batch, layout.kv_heads, held, layout.head_dim, dtype=dtype),
            torch.empty(batch, layout.kv_heads, held, layout.v_head_dim, dtype=dtype),
        )

    def _attend(self, batch: int, cache: tuple[torch.Tensor, ...]) -> None:
        """Write the new token into the last slot in place, then attend over the cache."""
        layout, dtype = self.layout, self.dtype
        if len(cache) == 1:  # latent: one KV head whose keys and values are the latent
            (latent,) = cache  # (a fused MLA kernel reads it once; no score matrix is kept)
            latent[:, -1:].copy_(torch.empty(batch, 1, latent.shape[-1], dtype=dtype))
            query = torch.empty(batch, layout.heads, 1, latent.shape[-1], dtype=dtype)
            shared = latent.unsqueeze(1)
            functional.scaled_dot_product_attention(
                query, shared, shared, enable_gqa=layout.heads > 1
            )
            return
        keys, values = cache
        keys[:, :, -1:].copy_(torch.empty(batch, layout.kv_heads, 1, layout.head_dim, dtype=dtype))
        values[:, :, -1:].copy_(
            torch.empty(batch, layout.kv_heads, 1, layout.v_head_dim, dtype=dtype)
        )
        query = torch.empty(batch, layout.heads, 1, layout.head_dim, dtype=dtype)
        functional.scaled_dot_product_attention(
            query, keys, values, enable_gqa=layout.heads != layout.kv_heads
        )


def _predict(step: _DecodeStep, batch: int, capacity: int, device: str) -> KVCheck:
    report = predict_peak_memory(
        lambda: step(batch), device=device, capacity_bytes=capacity, name=f"decode_b{batch}"
    )
    return KVCheck(batch, report.peak, report.fits)


def _confirmed(
    checks: tuple[KVCheck, ...], sequences: int | None, reserve: int, found: list[Diagnostic]
) -> bool | None:
    if not checks or any(check.fits is None for check in checks):
        return None
    expected = [True, False] if sequences else [False]
    confirmed = [check.fits for check in checks] == expected
    if not confirmed:
        told = ", ".join(f"batch {c.batch}: {c.predicted_peak.value:,} B" for c in checks)
        found.append(
            Diagnostic(
                code="kv_plan_not_confirmed",
                severity="warning",
                metric="max_sequences",
                message=f"the predicted decode steps ({told}) disagree with the closed form "
                f"at reserve_bytes={reserve:,}: the step's activations and the allocator's "
                "rounding need more reserve than given; raise reserve_bytes",
            )
        )
    return confirmed


def _config_of(model_or_config: Any) -> tuple[Any, str]:
    if isinstance(model_or_config, nn.Module):
        where = f"the model ({type(model_or_config).__name__})"
        config = getattr(model_or_config, "config", None)
        if config is None:
            raise ValueError(
                f"kv_cache_plan: {where} has no attention config (no .config with "
                "num_hidden_layers and num_attention_heads); give an HF causal LM or its config"
            )
        return config, where
    return model_or_config, f"the config ({type(model_or_config).__name__})"


def _weight_numel(model_or_config: Any, config: Any, where: str) -> int:
    """Parameters of the model (each once), or of the config's model built on ``meta``."""
    if isinstance(model_or_config, nn.Module):
        return sum(p.numel() for p in model_or_config.parameters())  # shared ones once
    try:
        transformers = importlib.import_module("transformers")
        with torch.device("meta"), _no_init(transformers):
            model = transformers.AutoModelForCausalLM.from_config(config)
    except Exception as error:  # any failure to build means: give the model instead
        message = " ".join(str(error).split())[:200]
        raise ValueError(
            f"kv_cache_plan: cannot count the weights of {where} (building its causal LM on "
            f"the meta device failed: {type(error).__name__}: {message}); pass the model"
        ) from None
    return sum(p.numel() for p in model.parameters())


def _no_init(transformers: Any) -> contextlib.AbstractContextManager[Any]:
    """transformers' switch that skips weight initialisation (seconds for an 8B model on
    ``meta``, where there is nothing to initialise), or nothing where this version lacks it."""
    for home in ("initialization", "modeling_utils"):
        switch = getattr(getattr(transformers, home, None), "no_init_weights", None)
        if callable(switch):
            return cast(contextlib.AbstractContextManager[Any], switch())
    return contextlib.nullcontext()


def _check_int(name: str, value: object, least: int) -> None:
    if type(value) is not int or value < least:
        raise ValueError(f"kv_cache_plan: {name} must be an int >= {least}, got {value!r}")


def _check_arguments(
    capacity: object, context: object, dtype: object, batch: object, reserve: object
) -> None:
    _check_int("capacity_bytes", capacity, 1)
    _check_int("context_len", context, 1)
    _check_int("batch_size", batch, 1)
    _check_int("reserve_bytes", reserve, 0)
    if not isinstance(dtype, torch.dtype) or not (
        dtype.is_floating_point or dtype in QUANTIZED_CACHE_DTYPES
    ):
        raise ValueError(
            "kv_cache_plan: dtype must be a torch floating dtype such as torch.bfloat16 (or "
            f"torch.int8 / torch.uint8 for a quantized cache), got {dtype!r}"
        )


def _recurrent_diagnostic(layout: CacheLayout) -> Diagnostic:
    layers = layout.recurrent_layers
    return Diagnostic(
        code="recurrent_state_unsized",
        severity="warning",
        metric="max_sequences",
        count=len(layers),
        message=f"{len(layers)} layer(s) (from layer {layers[0]}) keep a recurrent state per "
        "sequence (instead of or beside a KV cache), which the config does not size: pass "
        "state_bytes_per_sequence (the counts are unavailable without it)",
    )


def _weights_diagnostic(weights: int, budget: int) -> Diagnostic:
    return Diagnostic(
        code="weights_exceed_capacity",
        severity="warning",
        metric="max_sequences",
        message=f"the weights ({weights:,} B) exceed capacity - reserve ({budget:,} B): "
        "no sequence fits",
    )


def _unbounded_diagnostic(unit: str) -> Diagnostic:
    return Diagnostic(
        code="kv_cache_unbounded",
        severity="warning",
        metric=f"max_{unit}",
        message=f"the per-sequence memory does not grow without bound here (windowed or no "
        f"cache) and no limit applies: max {unit} is unavailable",
    )


def _position_limit_diagnostic(limit: int) -> Diagnostic:
    return Diagnostic(
        code="context_limited_by_model",
        severity="info",
        metric="max_context",
        message=f"the cache would fit a longer context; the model's position limit "
        f"(max_position_embeddings={limit:,}) is the answer",
    )
