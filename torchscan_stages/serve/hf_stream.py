"""A token-stream request handler for a Hugging Face causal LM: one token per ``next()``.

Served LLM latency is read per token: time to the first token (TTFT: the prefill, then the
first sampled token) and time per output token (TPOT: one decode step each). A handler
that hands back ``model.generate``'s finished output hides both. ``token_stream_handler``
returns the handler shape ``measure_served`` drives for token streams -- a callable taking
one sample (a prompt) and returning an iterator of tokens -- whose iterator does the work
lazily: the first ``next()`` runs the prefill and yields the first token, each later one
runs one decode step with the KV cache and yields its token. Greedy (argmax) decoding, the
deterministic case a latency figure can be checked against.

The model is duck-typed (no transformers import): ``model(input_ids=..., use_cache=True,
past_key_values=...)`` returns ``logits`` and ``past_key_values``, as every transformers
causal LM does.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import nn

Handler = Callable[[Any], Iterator[int]]


def _prompt(sample: Any, device: torch.device) -> torch.Tensor:
    """A sample as (1, tokens) int64 ids: a 1-D tensor, a sequence of ints, or a mapping
    holding ``input_ids`` (a tokenizer's output for one prompt)."""
    ids = sample.get("input_ids") if isinstance(sample, Mapping) else sample
    if isinstance(ids, torch.Tensor):
        tensor = ids.reshape(1, -1) if ids.dim() <= 1 or ids.shape[0] == 1 else None
    elif isinstance(ids, Sequence) and ids and all(type(t) is int for t in ids):
        tensor = torch.tensor([list(ids)])
    else:
        tensor = None
    if tensor is None or tensor.numel() == 0 or tensor.is_floating_point():
        raise ValueError(
            "token_stream_handler: a sample is one prompt of token ids (a 1-D int tensor, a "
            f"list of ints or a mapping with input_ids), got {type(sample).__name__}"
            + (f" of shape {tuple(ids.shape)}" if isinstance(ids, torch.Tensor) else "")
        )
    return tensor.to(device=device, dtype=torch.long)


def token_stream_handler(
    model: nn.Module, *, max_new_tokens: int, eos_token_id: int | None = None
) -> Handler:
    """``handler(prompt) -> iterator of token ids`` generating greedily with the KV cache.

    At most ``max_new_tokens`` tokens; the stream ends early after ``eos_token_id`` (it is
    yielded). Each ``next()`` runs one forward call under ``torch.inference_mode``; the
    token is read to the host (``.item()``), so a token is yielded only once it exists.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module (a causal LM), got {type(model).__name__}")
    if type(max_new_tokens) is not int or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
    if eos_token_id is not None and type(eos_token_id) is not int:
        raise ValueError(f"eos_token_id must be an int or None, got {eos_token_id!r}")
    device = next((p.device for p in model.parameters()), torch.device("cpu"))

    def handler(sample: Any) -> Iterator[int]:
        ids = _prompt(sample, device)  # checked now, before the stream is handed out
        return _stream(model, ids, max_new_tokens, eos_token_id)

    return handler


def _stream(
    model: nn.Module, ids: torch.Tensor, max_new_tokens: int, eos_token_id: int | None
) -> Iterator[int]:
    token, cache = prefill(model, ids)
    yield token
    for _ in range(max_new_tokens - 1):
        if token == eos_token_id:
            return
        token = decode_step(model, token, cache)
        yield token


def prefill(model: nn.Module, prompt: torch.Tensor) -> tuple[int, Any]:
    """The stream's first step, for timing it apart: (first token, the KV cache).

    The LM head runs on the last position only (``logits_to_keep=1``, as ``generate`` asks)
    where the forward takes it: logits for every prompt position are work no token needs.
    """
    keep = {"logits_to_keep": 1} if _takes(model, "logits_to_keep") else {}
    with torch.inference_mode():
        out = model(input_ids=prompt.reshape(1, -1), use_cache=True, **keep)
        return int(out.logits[:, -1:].argmax(-1).item()), out.past_key_values


def _takes(model: nn.Module, name: str) -> bool:
    """Whether ``model``'s forward has a parameter called ``name``."""
    try:
        return name in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # no readable signature: pass nothing extra
        return False


def decode_step(model: nn.Module, token: int, cache: Any) -> int:
    """One of the stream's later steps (the cache grows by one token), for timing it apart."""
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    with torch.inference_mode():
        ids = torch.tensor([[token]], device=device)
        out = model(input_ids=ids, past_key_values=cache, use_cache=True)
        return int(out.logits[:, -1:].argmax(-1).item())
