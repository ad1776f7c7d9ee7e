"""torchscan_stages: model cost, workload measurement, comparison and offline reports.

Only the names of the public contract (spec/API.md) live here.
"""

from ._version import __version__
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
    "ReportDiff",
    "__version__",
    "load_report",
]
