"""What stages and commands tell a newcomer: the why of a verdict, bf16 on a CPU, --help."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from torchscan_stages.pipeline.loader import load_config
from torchscan_stages.stages.compare import (
    bf16_cpu_note,
    check_text,
    cpu_has_bf16_matrix_units,
    verdict_text,
)

ROOT = Path(__file__).resolve().parents[2]
NO_BF16 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f\n"
AMX = "processor\t: 0\nflags\t\t: fpu avx2 avx512f amx_bf16 amx_tile\n"


def test_an_inconclusive_verdict_says_why_on_the_stage_line() -> None:
    def delta(verdict: str, reason: str) -> SimpleNamespace:
        return SimpleNamespace(verdict=verdict, reason=reason, withheld=False)

    assert (
        verdict_text(delta("inconclusive", "the interval straddles 1.05; was: slower, ..."))
        == "inconclusive: the interval straddles 1.05"
    )  # the short reason, as the page's row shows it
    assert verdict_text(delta("slower", "x")) == "slower"
    assert verdict_text(delta("slower", "loaded host: CI low x19.6 ...")) == "slower (loaded host)"


def test_the_default_bf16_candidate_on_a_cpu_without_bf16_units_is_explained() -> None:
    config = load_config([], conf_dir=ROOT / "conf")  # candidate bf16_autocast, device cpu
    assert cpu_has_bf16_matrix_units(NO_BF16) is False
    assert cpu_has_bf16_matrix_units(AMX) is True
    assert cpu_has_bf16_matrix_units("no flags line") is None
    assert "without bf16 matrix units" in bf16_cpu_note(config, NO_BF16)
    assert bf16_cpu_note(config, AMX) == ""  # AMX: bf16 may well be faster, no excuse printed
    fp32 = load_config(["candidate=channels_last"], conf_dir=ROOT / "conf")
    assert bf16_cpu_note(fp32, NO_BF16) == ""


def test_crawl_accepts_fill_from_operators_and_gpt2_is_complete_with_it(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from torchscan_stages.analysis.crawl import crawl_module
    from torchscan_stages.pipeline.workload import build_workload

    overrides = ["model=gpt2", "input=hf_tokens", "crawl.fill_from_operators=true"]
    config = load_config(overrides, conf_dir=ROOT / "conf")
    assert config.crawl.fill_from_operators is True
    workload = build_workload(config)
    report = crawl_module(
        workload.eager_model, args=workload.inputs, kwargs=workload.kwargs,
        fill_from_operators=config.crawl.fill_from_operators,
    )  # fmt: skip
    assert report.totals.module_flops.status == "complete"
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    assert params["crawl"]["fill_from_operators"] is False  # off unless asked for


@pytest.mark.parametrize(
    ("stage", "writes"),
    [
        (
            "compare",
            "reports/compare.json, reports/compare_diff.json, metrics/compare.json, "
            "metrics/compare.evidence.json",
        ),
        ("predict", "reports/predict.json, metrics/predict.json, metrics/predict.evidence.json"),
    ],
)
def test_stage_help_lists_everything_it_writes(stage: str, writes: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", f"torchscan_stages.stages.{stage}", "--help"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert f"writes: {writes}\n" in done.stdout


def test_package_help_points_to_the_pipeline_and_summary_explains_max_depth() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "torchscan_stages", "--help"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert "dvc repro" in done.stdout and "docs/pipeline.md" in done.stdout
    summary = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "torchscan_stages", "summary", "--help"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert "--max-depth MAX_DEPTH" in summary.stdout and "module depth" in summary.stdout
    # the help answers before torch is loaded: -X importtime lists the modules imported,
    # the command's own (targets) and no torch._C
    assert re.search(r"\| +torchscan_stages\.targets$", summary.stderr, re.M), summary.stderr
    assert re.search(r"\| +torch\._C$", summary.stderr, re.M) is None


def test_the_bf16_note_is_on_the_comparison_page_too() -> None:
    from torchscan_stages.provenance import build_provenance
    from torchscan_stages.render import render_report
    from torchscan_stages.report import BenchmarkComparison, CheckResult
    from torchscan_stages.stages.compare import with_bf16_note

    config = load_config([], conf_dir=ROOT / "conf")  # the default bf16_autocast candidate
    comparison = BenchmarkComparison(
        provenance=build_provenance(), baseline_name="baseline", candidate_name="bf16",
        check=CheckResult(performed=False, passed=None), deltas=[],
    )  # fmt: skip
    noted = with_bf16_note(comparison, bf16_cpu_note(config, NO_BF16))
    assert comparison.diagnostics == []  # the report passed in is left as it was
    (diagnostic,) = noted.diagnostics
    assert (diagnostic.code, diagnostic.severity) == ("bf16_without_matrix_units", "info")
    page = render_report(noted)
    assert "bf16_without_matrix_units" in page
    assert "expect the candidate to be slower, not faster" in page


def test_a_failed_candidate_is_named_on_the_stage_line_not_check_not_passed() -> None:
    from torchscan_stages.pipeline.candidate import _failed
    from torchscan_stages.report import CheckResult

    error = RuntimeError("inductor: no working C++ compiler")
    failed = _failed("compiled", error).check  # what the stage gets when the build raised
    assert check_text(failed) == (
        "candidate 'compiled' failed: RuntimeError: inductor: no working C++ compiler"
    )
    differs = CheckResult(performed=True, passed=False, detail="max |a-b| 0.3 > atol 0.05")
    assert check_text(differs) == "check failed: max |a-b| 0.3 > atol 0.05"
    assert check_text(CheckResult(performed=True, passed=True)) == "check passed"
    long = CheckResult(performed=False, passed=None, error="x" * 500)
    assert len(check_text(long)) == 300 and check_text(long).endswith("...")
