"""A decoder's KV-cache layout, read off its own config: what each layer keeps per token.

The cache a serving engine allocates per sequence follows the attention of each layer:

* ``full``: every token's keys and values, ``kv_heads x (head_dim + v_head_dim)`` elements
  (grouped-query attention keeps ``num_key_value_heads``, not the query heads; multi-query
  attention one);
* ``sliding``: the same per token, for at most ``window`` tokens (``sliding_window``, or
  ``attention_chunk_size`` for chunked attention);
* ``latent``: multi-head latent attention (DeepSeek-V2/V3 style) keeps one compressed
  vector per token, ``kv_lora_rank + qk_rope_head_dim`` elements, shared by K and V (what
  vLLM and SGLang cache; transformers' eager cache holds the decompressed keys and values);
* ``shared``: a layer that reads another layer's cache (``num_kv_shared_layers``) keeps none;
* ``recurrent``: a layer without attention (``linear_attention``, ``mamba``, ``conv``) keeps
  no KV cache but a fixed per-sequence state this module cannot size from the config;
* ``hybrid``: attention beside such a state in one layer (``hybrid``, ``hybrid_sliding``:
  Falcon-H1, Zamba2): the KV cache of its attention and the state;
* ``none``: a layer with neither (an MLP or MoE block of Nemotron-H: ``moe``, ``dense``).

A layer type this module does not know (sparse or compressed attention, whose cache is not
this layout) is refused with its name: no guessed cache.

Configs are read duck-typed (transformers' attribute names; GPT-2's ``n_layer`` etc. come
through its ``attribute_map``): ``layer_types`` when the config lists it, else Jamba's
``layers_block_type``, else one kind for every layer (sliding when ``sliding_window`` is set
and ``use_sliding_window`` is not False).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

Kind: TypeAlias = Literal["full", "sliding", "latent", "shared", "recurrent", "hybrid", "none"]
ATTENTION_TYPES = frozenset({"full_attention", "attention"})
# windowed attention: the config field that holds the window
WINDOW_TYPES = {
    "sliding_attention": "sliding_window",
    "chunked_attention": "attention_chunk_size",
    "hybrid_sliding": "sliding_window",
}
RECURRENT_TYPES = frozenset({"linear_attention", "mamba", "mamba2", "conv", "recurrent", "rwkv"})
HYBRID_TYPES = frozenset({"hybrid", "hybrid_sliding"})  # attention beside a recurrent state
NO_CACHE_TYPES = frozenset({"moe", "dense", "sparse", "mlp"})  # no attention, no state


@dataclass(frozen=True)
class LayerCache:
    """What one layer keeps per token of a sequence (elements), and for how many tokens."""

    kind: Kind
    elements_per_token: int  # 0 for shared, recurrent and none layers
    window: int | None = None  # sliding layers keep at most this many tokens
    state: bool = False  # a per-sequence recurrent state besides (recurrent, hybrid)

    def tokens_held(self, context_len: int) -> int:
        if self.elements_per_token == 0:
            return 0
        return min(self.window, context_len) if self.window is not None else context_len


@dataclass(frozen=True)
class CacheLayout:
    """Every layer's cache, the attention shape behind it, and the model's context limit."""

    layers: tuple[LayerCache, ...]
    heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: int
    latent_rank: int | None  # kv_lora_rank of a latent (MLA) cache
    vocab_size: int | None
    max_positions: int | None

    def elements_per_sequence(self, context_len: int) -> int:
        return sum(
            layer.elements_per_token * layer.tokens_held(context_len) for layer in self.layers
        )

    @property
    def recurrent_layers(self) -> list[int]:
        """Layers that keep a per-sequence state the config does not size."""
        return [i for i, layer in enumerate(self.layers) if layer.state]


def _int(config: Any, *names: str) -> int | None:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _layer_types(config: Any, count: int) -> list[str]:
    listed = getattr(config, "layer_types", None)
    if isinstance(listed, (list, tuple)) and len(listed) == count:
        return [str(kind) for kind in listed]
    blocks = getattr(config, "layers_block_type", None)  # Jamba: "attention" / "mamba"
    if isinstance(blocks, (list, tuple)) and len(blocks) == count:
        return [str(kind) for kind in blocks]
    sliding = _int(config, "sliding_window") and getattr(config, "use_sliding_window", True)
    return ["sliding_attention" if sliding else "full_attention"] * count


def read_layout(config: Any, where: str) -> CacheLayout:
    """The layout of ``config``; ValueError naming the missing field when it has no attention."""
    layers = _int(config, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(config, "num_attention_heads", "n_head", "num_heads")
    if layers is None or heads is None:
        raise ValueError(
            f"kv_cache_plan: {where} has no attention config (num_hidden_layers and "
            "num_attention_heads, as a transformers decoder config has); give an HF causal "
            "LM or its config"
        )
    if getattr(config, "is_encoder_decoder", False) is True:
        raise ValueError(
            f"kv_cache_plan: {where} is an encoder-decoder: its cross-attention cache (one per "
            "source length) is not modelled; plan decoder-only models"
        )
    kv_heads = _kv_heads(config, heads)
    hidden = _int(config, "hidden_size", "n_embd", "d_model")
    head_dim = _int(config, "head_dim") or (hidden // heads if hidden else None)
    if head_dim is None:
        raise ValueError(f"kv_cache_plan: {where} has neither head_dim nor hidden_size")
    v_head_dim = _int(config, "v_head_dim") or head_dim
    latent = _int(config, "kv_lora_rank")
    per_token = kv_heads * (head_dim + v_head_dim)
    if latent is not None:
        per_token = latent + (_int(config, "qk_rope_head_dim") or 0)
    shared_from = layers - (_int(config, "num_kv_shared_layers") or 0)
    built: list[LayerCache] = []
    for index, kind in enumerate(_layer_types(config, layers)):
        built.append(_layer(config, index, kind, per_token, latent is not None, shared_from))
    return CacheLayout(
        layers=tuple(built),
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        v_head_dim=v_head_dim,
        latent_rank=latent,
        vocab_size=_int(config, "vocab_size"),
        max_positions=_int(config, "max_position_embeddings", "n_positions"),
    )


def _kv_heads(config: Any, heads: int) -> int:
    """KV heads: ``num_key_value_heads`` (GQA); Falcon's ``num_kv_heads`` under its new
    architecture; one for multi-query attention (Falcon-7B, GPTBigCode); else every head."""
    listed = _int(config, "num_key_value_heads")
    if listed is not None:
        return listed
    if getattr(config, "new_decoder_architecture", False) is True:
        return _int(config, "num_kv_heads") or heads
    if getattr(config, "multi_query", False) is True:
        return 1
    return _int(config, "num_kv_heads") or heads


def _layer(
    config: Any, index: int, kind: str, per_token: int, latent: bool, shared_from: int
) -> LayerCache:
    if kind in RECURRENT_TYPES:
        return LayerCache("recurrent", 0, state=True)
    if kind in NO_CACHE_TYPES:
        return LayerCache("none", 0)
    if kind not in ATTENTION_TYPES and kind not in WINDOW_TYPES and kind not in HYBRID_TYPES:
        raise ValueError(
            f"kv_cache_plan: layer_types[{index}]={kind!r} is a layer whose cache this planner "
            f"does not know (it knows {sorted(ATTENTION_TYPES | set(WINDOW_TYPES))}, recurrent "
            f"{sorted(RECURRENT_TYPES)}, hybrid {sorted(HYBRID_TYPES)}); no guessed cache"
        )
    if index >= shared_from:
        return LayerCache("shared", 0)
    hybrid = kind in HYBRID_TYPES
    if kind in WINDOW_TYPES:
        window = _int(config, WINDOW_TYPES[kind])
        if window is not None:
            return LayerCache("hybrid" if hybrid else "sliding", per_token, window, hybrid)
    if hybrid:
        return LayerCache("hybrid", per_token, None, True)
    return LayerCache("latent" if latent else "full", per_token)
