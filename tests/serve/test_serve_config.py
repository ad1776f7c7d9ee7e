"""The serve stage's config: every group option composes and validates; a bad value names
its key in one line; the handler the stage builds serves the configured workload."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from torchscan_stages.pipeline.loader import load_config
from torchscan_stages.pipeline.schema import ConfigError, validate_config
from torchscan_stages.pipeline.serving import served_handler
from torchscan_stages.pipeline.workload import build_workload
from torchscan_stages.serve.options import ServeOptions

ROOT = Path(__file__).resolve().parents[2]


def _params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("option", ["single_stream", "server", "batched_server", "generate"])
def test_every_serve_option_composes_into_valid_serve_options(option: str) -> None:
    config = load_config([f"serve={option}"], conf_dir=ROOT / "conf")
    assert config.serve.scenario in ("single_stream", "server")
    ServeOptions.from_mapping(config.serve.options())  # the library accepts it as it is
    # serve=generate alone selects the decoder and its prompts; a model override still wins
    streams = option == "generate"
    assert (config.serve.max_new_tokens == 8) is streams
    assert (config.model.name, config.input.name) == (
        ("llama-tiny", "hf_tokens") if streams else ("cnn", "image")
    )
    if streams:
        other = load_config(["serve=generate", "model=gpt2"], conf_dir=ROOT / "conf")
        assert (other.model.name, other.serve.max_new_tokens) == ("gpt2-tiny", 8)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ({"scenario": "server", "target_qps": None}, "scenario 'server' needs an offered rate"),
        ({"target_qps": -5.0}, "serve.target_qps = -5.0"),
        ({"duration_s": 0}, "serve.duration_s = 0"),
        ({"bound_s": float("nan")}, "serve.bound_s"),
        ({"scenario": "burst"}, "serve.scenario = 'burst'"),
        ({"qps": 5}, "unknown key 'serve.qps'"),
        ({"max_new_tokens": 0}, "serve.max_new_tokens = 0"),
        ({"max_new_tokens": 8.5}, "serve.max_new_tokens = 8.5"),
        (
            {"max_new_tokens": 8, "max_batch": 4},
            "serve: max_new_tokens = 8 streams tokens one request at a time: max_batch must "
            "be 1, got 4",
        ),
    ],
)
def test_a_bad_serve_value_names_its_key_in_one_line(edit: dict, expected: str) -> None:
    params = _params()
    params["serve"].update(edit)
    with pytest.raises(ConfigError) as caught:
        validate_config(params)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_the_stage_handler_serves_the_workload_one_request_or_a_stacked_batch() -> None:
    built = build_workload(validate_config(_params()))
    single, samples = served_handler(built, 1)
    with torch.no_grad():
        expected = built()
    assert torch.equal(single(samples[0]), expected)  # one request: one workload call
    batched, samples = served_handler(built, 4)
    outputs = batched(samples[:3])  # three requests of batch 8: one forward of 24
    assert len(outputs) == 3 and all(o.shape == expected.shape for o in outputs)
    assert torch.allclose(outputs[2], expected, atol=1e-5)
