"""torchscan_stages: model cost, workload measurement, comparison and offline reports.

Only the names of the public contract (docs/api.md) live here. They load on first use, so
``import torchscan_stages`` (and the pipeline's env stage) does not import torch.

Never: imports torch, dvc, hydra or transformers at import time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from .analysis.crawl import crawl_module
    from .analysis.handlers import ModuleHandler
    from .analysis.operators import measure_flops
    from .compare.benchmarks import compare_benchmarks
    from .compare.deltas import Judge
    from .compare.reports import compare_reports
    from .face import measure_workload, summary
    from .measure.latency import measure_latency
    from .measure.latency_options import LatencyOptions
    from .measure.memory import measure_peak_memory
    from .measure.profile import profile_workload
    from .measure.rss import measure_peak_rss
    from .predict import predict_peak_memory
    from .predict.capacity import BatchSearch, max_batch_size
    from .predict.ddp import predict_ddp_peak_memory
    from .predict.entry import predict_memory
    from .predict.sharded import predict_sharded_peak_memory
    from .render import render_report
    from .report import (
        AnalysisReport,
        BenchmarkComparison,
        BenchmarkReport,
        Diagnostic,
        FlopReport,
        IncompleteAnalysisError,
        MetricResult,
        PredictionReport,
        ReportDiff,
        ServedCapacity,
        ServedReport,
        load_report,
    )
    from .serve.capacity import CapacitySearch, served_capacity
    from .serve.generation import generation_cost
    from .serve.kv_plan import kv_cache_plan
    from .serve.measure import measure_served
    from .serve.options import ServeOptions

_PUBLIC: dict[str, str] = {
    "crawl_module": ".analysis.crawl",
    "summary": ".face",
    "ModuleHandler": ".analysis.handlers",
    "measure_flops": ".analysis.operators",
    "generation_cost": ".serve.generation",
    "measure_peak_memory": ".measure.memory",
    "measure_latency": ".measure.latency",
    "measure_peak_rss": ".measure.rss",
    "profile_workload": ".measure.profile",
    "measure_workload": ".face",
    "predict_peak_memory": ".predict",
    "predict_sharded_peak_memory": ".predict.sharded",
    "max_batch_size": ".predict.capacity",
    "predict_ddp_peak_memory": ".predict.ddp",
    "predict_memory": ".predict.entry",
    "kv_cache_plan": ".serve.kv_plan",
    "BatchSearch": ".predict.capacity",
    "compare_reports": ".compare.reports",
    "compare_benchmarks": ".compare.benchmarks",
    "Judge": ".compare.deltas",
    "LatencyOptions": ".measure.latency_options",
    "measure_served": ".serve.measure",
    "served_capacity": ".serve.capacity",
    "ServeOptions": ".serve.options",
    "CapacitySearch": ".serve.capacity",
    "ServedReport": ".report",
    "ServedCapacity": ".report",
    "render_report": ".render",
    "load_report": ".report",
    "AnalysisReport": ".report",
    "FlopReport": ".report",
    "BenchmarkReport": ".report",
    "ReportDiff": ".report",
    "BenchmarkComparison": ".report",
    "PredictionReport": ".report",
    "MetricResult": ".report",
    "Diagnostic": ".report",
    "IncompleteAnalysisError": ".report",
}

__all__ = [
    "AnalysisReport",
    "BatchSearch",
    "BenchmarkComparison",
    "BenchmarkReport",
    "CapacitySearch",
    "Diagnostic",
    "FlopReport",
    "IncompleteAnalysisError",
    "Judge",
    "LatencyOptions",
    "MetricResult",
    "ModuleHandler",
    "PredictionReport",
    "ReportDiff",
    "ServeOptions",
    "ServedCapacity",
    "ServedReport",
    "__version__",
    "compare_benchmarks",
    "compare_reports",
    "crawl_module",
    "generation_cost",
    "kv_cache_plan",
    "load_report",
    "max_batch_size",
    "measure_flops",
    "measure_latency",
    "measure_peak_memory",
    "measure_peak_rss",
    "measure_served",
    "measure_workload",
    "predict_ddp_peak_memory",
    "predict_memory",
    "predict_peak_memory",
    "predict_sharded_peak_memory",
    "profile_workload",
    "render_report",
    "served_capacity",
    "summary",
]


def __getattr__(name: str) -> Any:
    module_name = _PUBLIC.get(name)
    if module_name is None:
        raise AttributeError(f"module 'torchscan_stages' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
