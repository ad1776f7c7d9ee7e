"""What one forward call of a generating model reads: its weights and its KV cache, in bytes.

Both are read off the run, not derived from a config. ``CallReads`` watches one model's
forward calls: which of its modules ran inside each call (their parameters are the weights
the call reads) and the cache object the call was given (the keys and values already in it
are what that step's attention reads besides its own new token's).

Conventions (docs/serving.md, "LLM generation"):

* weight bytes: every parameter of every module that ran inside the call, each parameter
  object once (tied weights are one object), at its own dtype; an ``nn.Embedding`` table
  read only by its lookup counts the rows looked up (indices x row bytes), not the table.
* KV-cache bytes: the ``keys`` and ``values`` held by the cache passed as
  ``past_key_values`` when the call starts (transformers' ``Cache.layers``, or the legacy
  tuple of per-layer ``(key, value)`` pairs; an encoder-decoder's self-attention and
  cross-attention caches together; a sparse-attention layer's indexer keys too). A
  sliding-window layer holds its window, a static cache its whole preallocated buffer (its
  attention reads every slot, masked). A quantized cache layer, or one holding neither
  keys/values nor a known state, makes the figure unavailable, never an undercount.
* recurrent-state bytes: the conv and recurrent states of linear-attention and Mamba
  layers (each step reads and rewrites them whole); not KV-cache bytes, kept beside them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

# config fields that name a mixture of experts: a step reads only its routed experts'
# weights, which the modules that ran cannot tell
EXPERT_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


@dataclass
class CallRecord:
    """One forward call: its input tokens, the modules that ran, the cache it was given."""

    batch: int | None
    tokens: int | None
    cache: CacheHeld
    modules: dict[int, nn.Module] = field(default_factory=dict)
    lookups: dict[int, int] = field(default_factory=dict)  # id(embedding) -> indices read


def token_shape(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int | None, int | None]:
    """(batch, tokens per sequence) of a causal LM call: ``input_ids`` or ``inputs_embeds``."""
    ids = kwargs.get("decoder_input_ids")  # an encoder-decoder's steps are its decoder's
    if ids is None:
        ids = kwargs.get("input_ids")
    if ids is None and args and isinstance(args[0], torch.Tensor):
        ids = args[0]
    if isinstance(ids, torch.Tensor) and ids.dim() == 2:
        return int(ids.shape[0]), int(ids.shape[1])
    embeds = kwargs.get("inputs_embeds")
    if isinstance(embeds, torch.Tensor) and embeds.dim() == 3:
        return int(embeds.shape[0]), int(embeds.shape[1])
    return None, None


def _nbytes(value: Any) -> int:
    return value.numel() * value.element_size() if isinstance(value, torch.Tensor) else 0


@dataclass(frozen=True)
class CacheHeld:
    """What a cache holds when a call starts: keys and values, and recurrent state."""

    kv: int | None  # None: a layer whose keys/values cannot be read (its note says why)
    state: int = 0  # conv / recurrent states of linear-attention and Mamba layers
    note: str | None = None

    def __add__(self, more: CacheHeld) -> CacheHeld:
        if self.kv is None or more.kv is None:
            return CacheHeld(None, self.state + more.state, self.note or more.note)
        return CacheHeld(self.kv + more.kv, self.state + more.state)


KV_NAMES = ("keys", "values", "indexer_keys")  # indexer keys: sparse attention's index cache
STATE_NAMES = ("conv_states", "recurrent_states")


def _tensors(value: Any) -> int:
    """Bytes of a tensor, or of the tensors in a list, tuple or dict of them."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(item) for item in value)
    return _nbytes(value)


def _layer_held(index: int, layer: Any) -> CacheHeld:
    name = type(layer).__name__
    if any(attr.startswith("_quantized") for attr in getattr(layer, "__dict__", {})):
        return CacheHeld(
            None,
            note=f"cache layer {index} ({name}) is quantized: its packed "
            "keys/values are not counted here",
        )
    has_kv = any(hasattr(layer, attr) for attr in KV_NAMES)
    has_state = any(hasattr(layer, attr) for attr in STATE_NAMES)
    if not has_kv and not has_state:
        return CacheHeld(
            None,
            note=f"cache layer {index} ({name}) holds neither keys/values "
            "nor a known recurrent state",
        )
    kv = sum(_tensors(getattr(layer, attr, None)) for attr in KV_NAMES)
    return CacheHeld(kv, sum(_tensors(getattr(layer, attr, None)) for attr in STATE_NAMES))


def cache_held(cache: Any) -> CacheHeld:
    """What ``cache`` (``past_key_values``) holds: transformers' ``Cache.layers``, an
    encoder-decoder's two caches, or the legacy tuple of per-layer ``(key, value)``."""
    if cache is None:
        return CacheHeld(0)
    if hasattr(cache, "self_attention_cache") and hasattr(cache, "cross_attention_cache"):
        return cache_held(cache.self_attention_cache) + cache_held(cache.cross_attention_cache)
    if isinstance(cache, (tuple, list)):  # legacy: ((key, value), ...) per layer
        return CacheHeld(sum(_tensors(layer) for layer in cache))
    layers = getattr(cache, "layers", None)
    if isinstance(layers, (list, tuple)):
        held = CacheHeld(0)
        for index, layer in enumerate(layers):
            held = held + _layer_held(index, layer)
        return held
    key_cache, value_cache = getattr(cache, "key_cache", None), getattr(cache, "value_cache", None)
    if isinstance(key_cache, list) and isinstance(value_cache, list):
        return CacheHeld(_tensors(key_cache) + _tensors(value_cache))
    return CacheHeld(
        None, note=f"past_key_values is a {type(cache).__name__}, whose keys/values are unknown"
    )


def expert_field(model: nn.Module) -> str | None:
    """The config field that makes ``model`` a mixture of experts (more than one expert)."""
    config = getattr(model, "config", None)
    for name in EXPERT_FIELDS:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 1:
            return f"{name}={value}"
    return None


def weight_bytes(record: CallRecord) -> int:
    """The weights one call read (module docstring's convention)."""
    full: dict[int, int] = {}  # id(parameter) -> bytes, read whole
    rows: dict[int, int] = {}  # id(parameter) -> bytes of the rows an embedding looked up
    for key, module in record.modules.items():
        looked_up = record.lookups.get(key)
        for parameter in module.parameters(recurse=False):
            size = _nbytes(parameter)
            if looked_up is not None and parameter is getattr(module, "weight", None):
                row = size // max(1, parameter.shape[0]) if parameter.dim() else size
                rows[id(parameter)] = min(size, rows.get(id(parameter), 0) + looked_up * row)
            else:
                full[id(parameter)] = size
    return sum(full.values()) + sum(v for k, v in rows.items() if k not in full)


class CallReads:
    """Hooks on one model while ``with``-active: one :class:`CallRecord` per forward call.

    ``stack`` is the owner stack of an OperatorCounter: ``forward[i]`` is on it while call
    ``i`` runs, so the counter files each operator under its call. Every hook is removed on
    exit, also on error.
    """

    def __init__(self, model: nn.Module, stack: list[str]) -> None:
        self.model = model
        self.stack = stack
        self.records: list[CallRecord] = []
        self._handles: list[Any] = []
        self._depth = 0

    def _pre(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._depth += 1
        if self._depth > 1:  # the model calling itself is one call
            return
        batch, tokens = token_shape(args, kwargs)
        held = cache_held(kwargs.get("past_key_values"))
        self.records.append(CallRecord(batch, tokens, held, {id(module): module}))
        self.stack.append(f"forward[{len(self.records) - 1}]")

    def _post(self, module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        self._depth -= 1
        if self._depth == 0 and self.stack:
            self.stack.pop()

    def _any_pre(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        if not self._depth:
            return
        record = self.records[-1]
        record.modules[id(module)] = module
        if isinstance(module, nn.Embedding) and args and isinstance(args[0], torch.Tensor):
            record.lookups[id(module)] = record.lookups.get(id(module), 0) + args[0].numel()

    def __enter__(self) -> CallReads:
        from torch.nn.modules.module import register_module_forward_pre_hook

        try:
            self._handles.append(self.model.register_forward_pre_hook(self._pre, with_kwargs=True))
            self._handles.append(
                self.model.register_forward_hook(self._post, with_kwargs=True, always_call=True)
            )
            self._handles.append(register_module_forward_pre_hook(self._any_pre))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
