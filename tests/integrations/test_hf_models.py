"""HF models built from config: random weights, no download, global RNG untouched."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers", reason="the [hf] extra (transformers) is not installed")

from torchscan_stages.integrations.hf_models import build_hf_model, token_inputs

GPT2 = {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 128, "n_positions": 64}


def test_build_is_seeded_and_leaves_the_global_generator() -> None:
    before = torch.random.get_rng_state()
    first = build_hf_model("GPT2Config", seed=3, **GPT2)
    second = build_hf_model("GPT2Config", seed=3, **GPT2)
    assert torch.equal(before, torch.random.get_rng_state())
    assert not first.training  # eval mode, as the pipeline expects
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_token_inputs_shape_and_mask() -> None:
    inputs = token_inputs(batch_size=2, seq_len=8, vocab_size=128, seed=1)
    assert inputs["input_ids"].shape == (2, 8) and inputs["input_ids"].dtype == torch.int64
    assert int(inputs["input_ids"].max()) < 128
    assert int(inputs["attention_mask"].sum()) == 2 * 8  # all ones: 16 visible tokens
    model = build_hf_model("GPT2Config", **GPT2)
    assert model(**inputs).last_hidden_state.shape == (2, 8, 64)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"config_class": "GPT2Config", "n_layers": 2},
            r"GPT2Config has no field\(s\) \['n_layers'\]",
        ),
        ({"config_class": "NoSuchConfig"}, "config_class='NoSuchConfig' is not a class"),
        ({"config_class": "GPT2Config", "model_class": "Nope"}, "model_class='Nope'"),
    ],
)
def test_bad_names_are_named(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_hf_model(**arguments)  # type: ignore[arg-type]
