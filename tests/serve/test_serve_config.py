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


@pytest.mark.parametrize("option", ["single_stream", "server", "batched_server"])
def test_every_serve_option_composes_into_valid_serve_options(option: str) -> None:
    config = load_config([f"serve={option}"], conf_dir=ROOT / "conf")
    assert config.serve.scenario in ("single_stream", "server")
    ServeOptions.from_mapping(config.serve.options())  # the library accepts it as it is


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ({"scenario": "server", "target_qps": None}, "scenario 'server' needs an offered rate"),
        ({"target_qps": -5.0}, "serve.target_qps = -5.0"),
        ({"duration_s": 0}, "serve.duration_s = 0"),
        ({"bound_s": float("nan")}, "serve.bound_s"),
        ({"scenario": "burst"}, "serve.scenario = 'burst'"),
        ({"qps": 5}, "unknown key 'serve.qps'"),
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
