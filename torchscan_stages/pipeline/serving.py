"""The configured workload as a request handler for the serve stage.

One request is one call of the configured model on the configured input (its batch is the
request's); with ``serve.max_batch > 1`` the server loop's gathered requests run as one
forward over their inputs stacked on dim 0 (``serve.batching``). Grad mode and precision
are the workload's (no_grad, the configured precision region). With
``serve.max_new_tokens`` a request is one prompt row of the configured input streamed
greedily, one forward per token (``stream_handler``): the token figures of a causal LM.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..report import Diagnostic, MetricResult
from ..serve.batching import single_forward, stacked_forward
from ..serve.hf_stream import token_stream_handler
from .schema import ConfigError, PipelineConfig
from .workload import BuiltWorkload

SAMPLES = 8  # LoadGen's sample library: the configured input, 8 times (one tensor object)


def served_handler(built: BuiltWorkload, max_batch: int) -> tuple[Callable[..., Any], list[Any]]:
    """(handler, samples) serving ``built``'s model on its inputs."""
    import torch

    model, region = built.model, built.precision_context

    def forward(*args: Any, **kwargs: Any) -> Any:
        with torch.no_grad(), region():
            return model(*args, **kwargs)

    sample = (built.inputs, built.kwargs)
    handler = stacked_forward(forward) if max_batch > 1 else single_forward(forward)
    return handler, [sample] * SAMPLES


def causal_lm_refusal(model: Any, model_name: str) -> str | None:
    """Why ``model`` cannot stream tokens (None: it can): it must be a decoder-only
    transformers model that generates (``can_generate()``: a causal LM head and a cache)."""
    can_generate = getattr(model, "can_generate", None)
    config = getattr(model, "config", None)
    if not (callable(can_generate) and can_generate()):
        return f"model {model_name!r} ({type(model).__name__}) is not a causal language model"
    if getattr(config, "is_encoder_decoder", False):
        return f"model {model_name!r} ({type(model).__name__}) is an encoder-decoder"
    return None


def prompt_rows(built: BuiltWorkload, input_name: str) -> list[Any]:
    """The configured input's ``input_ids`` as one 1-D prompt per row (a ConfigError when
    there are none, or when its attention mask pads: a stream reads every id as a token)."""
    import torch

    ids, mask = built.kwargs.get("input_ids"), built.kwargs.get("attention_mask")
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.numel() == 0:
        raise ConfigError(
            f"serve.max_new_tokens needs token prompts (keyword input_ids of shape (batch, "
            f"tokens), e.g. input=hf_tokens); input {input_name!r} gives none"
        )
    if isinstance(mask, torch.Tensor) and not bool(mask.bool().all()):
        raise ConfigError(
            "serve.max_new_tokens streams every prompt id as a token: the input's "
            "attention_mask pads some positions (serve unpadded prompts)"
        )
    return list(ids.unbind(0))


def stream_handler(
    built: BuiltWorkload, cfg: PipelineConfig
) -> tuple[Callable[[Any], Iterator[int]], list[Any]]:
    """(handler, samples) streaming ``max_new_tokens`` greedy tokens for each prompt row of
    the configured input, one forward per token (``token_stream_handler``), in the
    workload's precision region. Every stream runs to ``max_new_tokens`` (the end-of-sequence
    token is not a stop, as in vLLM's serving benchmark with ``ignore_eos``), so each request
    carries the same work."""
    max_new_tokens = cfg.serve.max_new_tokens
    if max_new_tokens is None:
        raise ValueError("stream_handler: serve.max_new_tokens is not set")
    refusal = causal_lm_refusal(built.eager_model, cfg.model.name)
    if refusal is not None:
        raise ConfigError(
            f"serve.max_new_tokens = {max_new_tokens} serves token streams: {refusal} "
            "(use a decoder such as model=llama input=hf_tokens, or serve.max_new_tokens=null)"
        )
    samples = prompt_rows(built, cfg.input.name)
    stream = token_stream_handler(built.model, max_new_tokens=max_new_tokens)
    region = built.precision_context

    def handler(sample: Any) -> Iterator[int]:
        with region():
            tokens = stream(sample)  # checks the prompt now, before the stream is handed out
        return _in_region(tokens, region)

    return handler, samples


def _in_region(tokens: Iterator[int], region: Callable[[], Any]) -> Iterator[int]:
    """Each ``next()`` of ``tokens`` inside the precision region, never between tokens."""
    while True:
        with region():
            token = next(tokens, None)
        if token is None:
            return
        yield token


GENERATION_KEYS = {"prefill_flops": "prefill_flops", "decode_token_flops": "decode_flops_per_token"}


def counted_stream(
    built: BuiltWorkload, handler: Callable[[Any], Iterator[int]], sample: Any
) -> tuple[dict[str, MetricResult], Diagnostic]:
    """``generation_cost`` of one served request (``sample``'s whole stream, counted once):
    the metrics keys' results (prefill FLOPs, decode FLOPs per output token) and an info
    note that puts them in the served report beside the token latencies."""
    from ..serve.generation import generation_cost

    cost = generation_cost(built.eager_model, lambda: list(handler(sample)), name=built.name)
    found = {key: getattr(cost, field) for key, field in GENERATION_KEYS.items()}
    prefill, decode = found["prefill_flops"], found["decode_token_flops"]
    note = Diagnostic(
        code="generation_cost",
        severity="info",
        metric="tokens",
        message=(
            f"one request's stream counted (generation_cost): prefill {_shown(prefill)} FLOPs "
            f"for {cost.prompt_tokens} prompt tokens, decode {_shown(decode)} FLOPs per "
            f"output token over {len(cost.decode_steps)} steps; metrics/serve.json "
            "prefill_flops, decode_token_flops"
        ),
    )
    return found, note


def _shown(result: MetricResult) -> str:
    """A count as the note states it: ``1,234 (complete)``, or its status alone."""
    if result.value is None:
        return f"({result.status})"
    return f"{result.value:,.0f} ({result.status})"
