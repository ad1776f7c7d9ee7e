"""summary(): golden text, max_depth, markers, returned report, flags restored."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from torchscan_stages.analysis.crawl import crawl_module
from torchscan_stages.commands.summary import main
from torchscan_stages.face import summary
from torchscan_stages.render.text import compact_metric
from torchscan_stages.report import IncompleteAnalysisError, MetricResult, load_report

GOLDEN = Path(__file__).parent / "golden" / "summary_cnn.txt"


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def _model() -> Net:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return Net()


def test_summary_matches_golden() -> None:
    buffer = io.StringIO()
    report = summary(_model(), (3, 8, 8), file=buffer)
    text = buffer.getvalue()
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()
    assert report.model_type == "Net"


def test_max_depth_and_training_flags() -> None:
    model = _model().train()
    buffer = io.StringIO()
    summary(model, (3, 8, 8), max_depth=0, file=buffer)
    lines = [line for line in buffer.getvalue().splitlines() if line.startswith("Net")]
    assert len(lines) == 1
    assert "Conv2d" not in buffer.getvalue()
    assert model.training and model.features.training


def test_markers() -> None:
    args = {"unit": "FLOPs", "scope": "forward", "method": "module_formula"}
    assert compact_metric(MetricResult.complete(1500, **args)) == "1.50k"
    assert compact_metric(MetricResult.partial(12, **args)) == ">=12"
    assert compact_metric(MetricResult.unavailable(**args)) == "n/a"


def test_command_writes_report(tmp_path: Path, capsys: object) -> None:
    target = tmp_path / "out" / "summary.json"
    assert main(["--json", str(target), "--max-depth", "1", "--mode", "structure"]) == 0
    report = load_report(target)
    assert report.kind == "analysis" and report.mode == "structure"
    assert json.loads(target.read_text())["model_type"] == "SmallResNet"


def test_collapsed_containers_show_the_parameters_they_hold() -> None:
    inner = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    model = nn.Sequential(inner, nn.Flatten(), nn.Linear(144, 2))
    out = io.StringIO()
    summary(model, (3, 8, 8), max_depth=1, file=out)
    row = next(line for line in out.getvalue().splitlines() if line.startswith("  0 "))
    # the folded Sequential holds the conv: 4*3*3*3 weights + 4 biases = 112
    assert " 112 " in row


def test_strict_still_prints_the_table_before_raising() -> None:
    class Leaf(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2  # arithmetic with no handler: incomplete

    out = io.StringIO()
    with pytest.raises(IncompleteAnalysisError):
        summary(nn.Sequential(nn.Linear(3, 3), Leaf()), (3,), strict=True, file=out)
    assert "Leaf" in out.getvalue() and "unsupported_module" in out.getvalue()


def test_subtree_parameters_count_tied_tensors_once() -> None:
    first, second = nn.Linear(4, 4), nn.Linear(4, 4)
    second.weight = first.weight  # tied: 16 weights held once
    model = nn.Sequential(nn.Sequential(first, second))
    from torchscan_stages.analysis.crawl import crawl_module

    held = crawl_module(model, (4,), mode="structure").subtree_parameters()
    # 16 shared weights + 4 + 4 biases = 24, for the inner container and the root alike
    assert (held[""], held["0"], held["0.0"], held["0.1"]) == (24, 24, 20, 4)


def _gpt2() -> nn.Module:
    pytest.importorskip("transformers")
    from torchscan_stages.integrations.hf_models import build_hf_model

    config = {"n_layer": 3, "n_embd": 32, "n_head": 4, "vocab_size": 64, "n_positions": 16}
    return build_hf_model("GPT2Config", **config, bos_token_id=0, eos_token_id=0)


def test_gpt2_summary_groups_diagnostics_and_nests_blocks_under_h() -> None:
    out = io.StringIO()
    report = summary(_gpt2(), args=(torch.zeros(1, 8, dtype=torch.long),), file=out)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Diagnostics ("))
    assert len(lines) - start - 1 <= 10  # grouped: one line per class and code
    assert len(report.diagnostics) >= len(lines) - start - 1  # the full list stays in the report
    rows = [line for line in lines if line.strip().split(" ")[0] in {"h", "0", "1", "2", "drop"}]
    h = next(line for line in rows if line.lstrip().startswith("h "))
    block = next(line for line in rows if line.lstrip().startswith("0 ") and "GPT2Block" in line)
    indent = len(h) - len(h.lstrip())
    assert "ModuleList" in h
    assert len(block) - len(block.lstrip()) == indent + 2  # the blocks sit under transformer.h
    assert "Op FLOPs" in lines[1]


def test_grouped_diagnostic_line_counts_and_names_paths() -> None:
    class Leaf(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2

    out = io.StringIO()
    summary(nn.Sequential(*[Leaf() for _ in range(5)]), (3,), file=out)
    line = next(line for line in out.getvalue().splitlines() if "unsupported_module" in line)
    assert "Leaf x5 at 0, 1, 2 (+2 more)" in line


def test_command_runs_a_model_by_import_path(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "my_models.py").write_text(
        "import torch\n"
        "def model():\n    return torch.nn.Sequential(torch.nn.Linear(4, 2))\n"
        "def batch():\n    return torch.zeros(1, 4)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    target = tmp_path / "report.json"
    argv = ["--model", "my_models:model", "--input", "my_models:batch", "--json", str(target)]
    assert main(argv) == 0
    # Linear(4, 2) on one row: 2*4*2 + 2 bias adds = 18 FLOPs
    assert load_report(target).totals.module_flops.value == 18


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--model", "no_such_pkg.models:build"], "cannot import 'no_such_pkg.models'"),
        (["--model", "json:nothing_here"], "module 'json' has no 'nothing_here'"),
        (["--model", "json:dumps", "--input-shape", "4"], "calling it raised TypeError"),
        (["--model", "resnet"], "expected one of cnn, transformer or pkg.module:factory"),
        (["--model", "torch.nn:Identity"], "needs its inputs"),
        (["--model", "torch.nn:Identity", "--input-shape", "a,b"], "--input-shape 'a,b'"),
    ],
)
def test_command_names_a_bad_import_path(argv: list[str], expected: str, capsys: Any) -> None:
    assert main(argv) == 2
    assert expected in capsys.readouterr().err


def test_command_takes_the_pipeline_spelling_too(capsys: Any, tmp_path: Path) -> None:
    """``pkg.module.factory`` (a config's ``_target_``) works as ``pkg.module:factory`` does."""
    target = tmp_path / "summary.json"  # never the cwd-relative default: not into the checkout
    assert main(["--model", "torch.nn.Identity", "--input-shape", "4", "--json", str(target)]) == 0
    assert "Identity" in capsys.readouterr().out
    assert load_report(target).model_type == "Identity"  # type: ignore[union-attr]


def test_an_uncalled_container_row_holds_its_childrens_parameters() -> None:
    class Stack(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])  # never called

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for block in self.blocks:
                x = block(x)
            return x

    report = crawl_module(Stack(), (4,))
    held = report.subtree_parameters()
    # two Linear(4, 4): 16 weights + 4 biases each = 20 + 20, under the uncalled ModuleList
    assert "blocks" not in {layer.path for layer in report.layers}
    assert (held["blocks"], held[""]) == (40, 40)
    out = io.StringIO()
    summary(Stack(), (4,), file=out)
    row = next(line for line in out.getvalue().splitlines() if line.lstrip().startswith("blocks"))
    assert " 40 " in f"{row} "
