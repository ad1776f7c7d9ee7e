"""token_stream_handler: the tokens of greedy generate, one forward call per ``next()``."""

from __future__ import annotations

from collections import UserDict

import pytest
import torch
from torch import nn

pytest.importorskip("transformers", reason="the [hf] extra (transformers) is not installed")

from torchscan_stages.integrations.hf_models import build_hf_model
from torchscan_stages.serve.hf_stream import token_stream_handler

LLAMA = {
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "hidden_size": 32,
    "intermediate_size": 48,
    "vocab_size": 64,
    "max_position_embeddings": 64,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "pad_token_id": 0,
}
PROMPT = torch.tensor([5, 9, 17, 33, 2, 60, 11, 7])


@pytest.fixture(scope="module")
def llama() -> nn.Module:
    return build_hf_model("LlamaConfig", model_class="AutoModelForCausalLM", **LLAMA)


def test_the_stream_is_greedy_generate_one_call_per_token(llama: nn.Module) -> None:
    with torch.no_grad():
        expected = llama.generate(
            PROMPT[None], max_new_tokens=6, min_new_tokens=6, do_sample=False
        )[0, len(PROMPT) :].tolist()
    calls: list[int] = []  # tokens each forward call took in
    kept: list[object] = []  # the logits it asked for (generate's prefill: the last only)

    def record(_module: nn.Module, _args: object, kwargs: dict) -> None:
        calls.append(kwargs["input_ids"].shape[1])
        kept.append(kwargs.get("logits_to_keep"))

    handle = llama.register_forward_pre_hook(record, with_kwargs=True)
    try:
        stream = token_stream_handler(llama, max_new_tokens=6)(PROMPT)
        assert calls == []  # lazy: nothing runs before the first next()
        first = next(stream)
        assert calls == [8]  # the prefill: the 8 prompt tokens
        rest = list(stream)
    finally:
        handle.remove()
    assert [first, *rest] == expected
    assert calls == [8, 1, 1, 1, 1, 1]  # then one decode step per token, with the cache
    assert kept == [1, None, None, None, None, None]  # no logits for the 7 other prompt tokens


def test_the_stream_ends_after_the_end_token(llama: nn.Module) -> None:
    tokens = list(token_stream_handler(llama, max_new_tokens=6)(PROMPT.tolist()))
    # a tokenizer's output for one prompt (a mapping holding (1, n) input_ids) streams alike
    encoded = UserDict({"input_ids": PROMPT[None], "attention_mask": torch.ones(1, 8)})
    assert list(token_stream_handler(llama, max_new_tokens=6)(encoded)) == tokens
    stop = tokens[2]  # pretend the third token is the end-of-sequence token
    short = list(token_stream_handler(llama, max_new_tokens=6, eos_token_id=stop)(PROMPT))
    assert short == tokens[: tokens.index(stop) + 1]


@pytest.mark.parametrize(
    "sample", [torch.zeros(2, 4, dtype=torch.long), [], "hello", PROMPT.float()]
)
def test_a_bad_sample_is_refused_when_handled(llama: nn.Module, sample: object) -> None:
    handler = token_stream_handler(llama, max_new_tokens=2)
    with pytest.raises(ValueError, match="a sample is one prompt of token ids"):
        handler(sample)


def test_bad_settings_are_refused(llama: nn.Module) -> None:
    with pytest.raises(ValueError, match="max_new_tokens must be an int >= 1, got 0"):
        token_stream_handler(llama, max_new_tokens=0)
    with pytest.raises(TypeError, match=r"model must be an nn\.Module"):
        token_stream_handler("llama", max_new_tokens=2)  # type: ignore[arg-type]
