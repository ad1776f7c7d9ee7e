"""Each stage depends on exactly the params that change its output (dvc.yaml's params lists).

``threads`` changes how fast the workload runs, never what it counts: only the stages that
time depend on it, so `dvc repro` after a ``threads`` change reruns only those. The lists are
checked against dvc.yaml and against what the counting stages' bodies really read.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from torchscan_stages.pipeline.hostlock import TIMING_STAGES
from torchscan_stages.pipeline.runner import StageContext, run_context
from torchscan_stages.pipeline.schema import config_section, validate_config

ROOT = Path(__file__).resolve().parents[2]


def _stages() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]


def test_threads_is_a_param_of_exactly_the_stages_that_time() -> None:
    stages = _stages()
    with_threads = {name for name, stage in stages.items() if "threads" in stage.get("params", [])}
    assert with_threads == set(TIMING_STAGES) == {"latency", "rss", "profile", "compare", "serve"}
    # every other stage that builds the model still depends on everything else it reads
    for name in ("crawl", "flops", "memory", "predict"):
        assert stages[name]["params"][:5] == ["model", "input", "device", "precision", "seed"]


def test_dvc_plots_output_is_ignored() -> None:
    # `dvc plots show` / `dvc plots diff` write dvc_plots/ in the repository root
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "/dvc_plots/" in ignored


class _OnlyKeys:
    """The validated config, refusing any top-level key the stage did not declare."""

    def __init__(self, config: Any, keys: tuple[str, ...]) -> None:
        self._config, self._keys = config, keys

    def __getattr__(self, name: str) -> Any:
        if name not in self._keys:
            raise AssertionError(f"the stage read config.{name}, which is not in its KEYS")
        return getattr(self._config, name)


@pytest.mark.parametrize("name", ["crawl", "flops", "memory"])
def test_a_counting_stage_reads_only_its_declared_keys(name: str, tmp_path: Path) -> None:
    module = importlib.import_module(f"torchscan_stages.stages.{name}")
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    raw["model"]["kwargs"]["width"] = 4  # the default model, small: what is read matters here
    raw["input"]["kwargs"].update(batch_size=1, height=8, width=8)
    config = _OnlyKeys(validate_config(raw), module.KEYS)
    run = run_context(name, raw, module.KEYS)
    ctx = StageContext(name, config, config_section(raw, module.KEYS), tmp_path, run)  # type: ignore[arg-type]
    module.run(ctx)  # reading config.threads (or any undeclared key) fails here
    assert "threads" not in module.KEYS and ctx.pending  # it ran to its outputs
    assert _stages()[name]["params"] == list(module.KEYS)
