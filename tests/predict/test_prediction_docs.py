"""docs/prediction.md's code runs as written (Python blocks in order; the YAML parses and is
the stage's own settings)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "prediction.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)


MARKER = re.compile(
    r"(<!-- docs-test: run in tests/predict/test_prediction_docs\.py::test_python_blocks_run"
    r"[^>]*-->\n)?```python\n"
)


def test_python_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # as tests/test_docs.py runs a page: a scratch folder
    blocks = _blocks("python")
    assert len(blocks) == 6
    # each block is marked as run here, so tests/test_docs.py parses it but does not run
    # the page a second time
    assert all(MARKER.findall(PAGE.read_text(encoding="utf-8"))), "a block lacks its marker"
    namespace: dict[str, object] = {"__name__": "docs_prediction"}
    exec(compile(blocks[0], "docs/prediction.md[block 1]", "exec"), namespace)
    report = namespace["report"]
    # the recipe's answer is a complete prediction with a verdict against 24 GiB
    assert report.peak.status == "complete"  # type: ignore[attr-defined]
    assert report.fits is True  # type: ignore[attr-defined]
    # then the resident-model recipe, worst-case routing, the sharded recipe (one FSDP2 rank
    # and a max-batch search), one DDP rank and whole-model analysis, in file order; asserts
    # inside
    for number, block in enumerate(blocks[1:], start=2):
        exec(compile(block, f"docs/prediction.md[block {number}]", "exec"), namespace)
    search = namespace["search"]
    assert search.batch is not None and search.batch + 1 in search.curve  # type: ignore[attr-defined]


def test_yaml_block_is_the_stage_settings() -> None:
    from torchscan_stages.pipeline.schema import PredictSettings

    (block,) = _blocks("yaml")
    settings = yaml.safe_load(block)["predict"]
    assert PredictSettings.model_validate(settings) == PredictSettings()
    config = yaml.safe_load((ROOT / "conf" / "config.yaml").read_text(encoding="utf-8"))
    assert config["predict"] == settings
