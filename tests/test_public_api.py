"""The curated public surface: exactly the names of spec/API.md, importable, and cheap."""

from __future__ import annotations

import subprocess
import sys

import torchscan_stages

SPEC_NAMES = {
    "crawl_module", "summary", "measure_flops", "measure_peak_memory", "measure_latency",
    "measure_peak_rss", "profile_workload", "measure_workload", "compare_reports",
    "compare_benchmarks", "render_report", "load_report",
    "AnalysisReport", "FlopReport", "BenchmarkReport", "ReportDiff", "BenchmarkComparison",
    "MetricResult", "Diagnostic", "ModuleHandler", "IncompleteAnalysisError",
    "predict_peak_memory", "PredictionReport",  # prediction before running
    "LatencyOptions", "Judge",  # the settings objects, accepted as options=
    "predict_sharded_peak_memory", "max_batch_size", "BatchSearch",  # per rank
    "predict_ddp_peak_memory",  # DDP's gradient buckets per rank
    "predict_memory",  # one entry: one device, or one rank of FSDP2 or DDP
    "measure_served", "served_capacity", "ServeOptions", "CapacitySearch",  # served load
    "ServedReport", "ServedCapacity",
    "generation_cost", "kv_cache_plan",  # LLM generation cost, KV-cache planner
}  # fmt: skip


def test_all_is_the_spec() -> None:
    assert set(torchscan_stages.__all__) == SPEC_NAMES | {"__version__"}


def test_every_public_name_resolves() -> None:
    for name in SPEC_NAMES:
        assert getattr(torchscan_stages, name) is not None, name
    from torchscan_stages import crawl_module, measure_flops  # noqa: F401


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        torchscan_stages.no_such_name  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as error:
        assert "no_such_name" in str(error)
    else:  # pragma: no cover - the assertion explains the failure
        raise AssertionError("an unknown name must raise AttributeError")


def test_import_pulls_in_neither_torch_nor_dvc_nor_hydra() -> None:
    code = (
        "import sys, torchscan_stages; "
        "print(sorted(m for m in ('torch', 'dvc', 'hydra') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
