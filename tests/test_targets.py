"""One import resolver for the summary CLI and the pipeline's ``_target_``: both spellings."""

from __future__ import annotations

import json

import pytest

from torchscan_stages.pipeline.schema import ConfigError
from torchscan_stages.pipeline.workload import resolve_target
from torchscan_stages.targets import import_target


@pytest.mark.parametrize("spec", ["json:dumps", "json.dumps"])
def test_both_spellings_name_the_same_callable(spec: str) -> None:
    assert import_target(spec) is json.dumps


def test_a_dotted_attribute_after_the_colon() -> None:
    assert import_target("json:JSONDecoder.decode") is json.JSONDecoder.decode


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("dumps", "expected an importable 'pkg.module:factory' or 'pkg.module.factory'"),
        ("json:", "expected an importable"),
        ("no_such_pkg.models:build", "cannot import 'no_such_pkg.models' (ModuleNotFoundError"),
        ("json.nothing_here", "module 'json' has no 'nothing_here'"),
        ("json:__doc__", "'__doc__' in module 'json' is not callable"),
    ],
)
def test_failures_say_what_failed(spec: str, reason: str) -> None:
    with pytest.raises(ValueError, match=None) as raised:
        import_target(spec)
    assert reason in str(raised.value)


def test_the_pipeline_prefixes_its_config_key() -> None:
    assert resolve_target("json:dumps", "model._target_") is json.dumps
    with pytest.raises(ConfigError) as raised:
        resolve_target("json.nothing_here", "model._target_")
    assert str(raised.value) == (
        "model._target_ = 'json.nothing_here': module 'json' has no 'nothing_here'"
    )
