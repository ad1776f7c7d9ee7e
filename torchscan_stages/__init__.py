"""torchscan_stages: model cost, workload measurement, comparison and offline reports.

Only the names of the public contract (spec/API.md) live here.
"""

from ._version import __version__
from .analysis.crawl import crawl_module
from .analysis.handlers import ModuleHandler
from .analysis.summary import summary
from .compare import compare_benchmarks, compare_reports
from .render import render_report
from .report import (
    AnalysisReport,
    BenchmarkComparison,
    BenchmarkReport,
    Diagnostic,
    FlopReport,
    IncompleteAnalysisError,
    MetricResult,
    ReportDiff,
    load_report,
)

__all__ = [
    "AnalysisReport",
    "BenchmarkComparison",
    "BenchmarkReport",
    "Diagnostic",
    "FlopReport",
    "IncompleteAnalysisError",
    "MetricResult",
    "ModuleHandler",
    "ReportDiff",
    "__version__",
    "compare_benchmarks",
    "compare_reports",
    "crawl_module",
    "load_report",
    "render_report",
    "summary",
]
