"""Wire models for every report kind, their invariants, and atomic load/save.

One package, one job per module: ``metric`` (MetricResult, Diagnostic), ``records`` (analysis
layer records), ``models`` (the report kinds), ``kinds`` (the one list of them: ``AnyReport``,
``REPORT_TYPES``), ``history``, ``evidence``, ``served``, ``sweep`` and ``fingerprint`` (kinds
of their own), ``codec`` (the compact form), ``io`` (reading bytes, the atomic write,
saving) and ``load`` (``load_report``). Import the names from here.

Reports are the product: every number travels inside a :class:`MetricResult` that states
whether it is complete, a lower bound, or missing, and what it covers and how it was
obtained. JSON is the only machine interface; these models are its schema.

Schema-version policy (``SCHEMA_VERSION``, written into every report):

* A new optional field (with a default that states "not recorded", usually ``None``) is
  compatible: no bump. Older reports load with the default; older readers refuse the new
  field (``extra="forbid"``), so write reports with the version you read them with.
  ``FlopReport.product_flops`` was added this way.
* A field whose meaning or unit changes, whose allowed values widen or change, or a field
  removed or renamed, is a breaking change: bump ``SCHEMA_VERSION``; ``load_report`` then
  refuses reports of any other version with one line naming both versions (re-create them
  with this version).
* Refusing values no correct writer ever produced (negative counts, NaN or infinite times)
  is a fix, not a schema change: no bump. Such a report was already wrong.
* A new on-disk encoding of the same fields is a breaking change for older readers: bump.
  Version 2 is the compact form (``report.codec``: defaults left out, analysis layers stored
  column-wise); this version still reads version 1 files (``READABLE_VERSIONS``) and holds
  them in memory as the current version, since the fields did not change.

Every number a report carries is checked on load: counts, bytes, FLOPs and times are finite
and non-negative, so a report ``load_report`` accepts can always be rendered.

Never: measures, or lays out a page (number forms and ``print(report)`` lines only).
"""

from __future__ import annotations

from .evidence import MetricEvidence, MetricsEvidence
from .io import (
    STALE_TMP_AGE_S,
    atomic_write_text,
    check_output_path,
    clean_stale_temporaries,
    report_text,
    save_report,
    write_output,
    write_temporary,
)
from .kinds import REPORT_KINDS, REPORT_TYPES, AnyReport
from .load import load_report, report_json_schema, report_of_kind
from .metric import (
    GZIP_MAGIC,
    NON_NEGATIVE_UNITS,
    READABLE_VERSIONS,
    SCHEMA_VERSION,
    STATUS_MARKERS,
    Diagnostic,
    FiniteFloat,
    MetricResult,
    NonNegFloat,
    NonNegInt,
    Number,
    Severity,
    Status,
    StrictNumber,
    combine_sum,
    trusted_construct,
)
from .models import (
    AnalysisReport,
    AnalysisTotals,
    BaseReport,
    BatchPoint,
    BenchmarkComparison,
    BenchmarkReport,
    BlockOutlier,
    CheckResult,
    CompileRecord,
    EnvironmentInfo,
    ExecutionRecord,
    FlopReport,
    HostPressure,
    HostState,
    IgnoredOperator,
    IncompleteAnalysisError,
    LatencyNoise,
    LatencySection,
    LatencyStats,
    LayerChange,
    LayerKey,
    MemorySection,
    MetricDelta,
    OperatorCount,
    PerformanceDelta,
    PredictionReport,
    ProfiledOperator,
    ProfileSection,
    Provenance,
    ReportDiff,
    RssPhase,
    RssSection,
    RunContext,
    RuntimeState,
    Verdict,
)
from .records import LayerMetrics, LayerOperatorFlops, LayerRecord, ParameterStats, ValueMeta
from .served import (
    CapacityPoint,
    ServedBatching,
    ServedCapacity,
    ServedDistribution,
    ServedReport,
    ServedTokens,
    ServedValidity,
)

__all__ = [
    "GZIP_MAGIC",
    "NON_NEGATIVE_UNITS",
    "READABLE_VERSIONS",
    "REPORT_KINDS",
    "REPORT_TYPES",
    "SCHEMA_VERSION",
    "STALE_TMP_AGE_S",
    "STATUS_MARKERS",
    "AnalysisReport",
    "AnalysisTotals",
    "AnyReport",
    "BaseReport",
    "BatchPoint",
    "BenchmarkComparison",
    "BenchmarkReport",
    "BlockOutlier",
    "CapacityPoint",
    "CheckResult",
    "CompileRecord",
    "Diagnostic",
    "EnvironmentInfo",
    "ExecutionRecord",
    "FiniteFloat",
    "FlopReport",
    "HostPressure",
    "HostState",
    "IgnoredOperator",
    "IncompleteAnalysisError",
    "LatencyNoise",
    "LatencySection",
    "LatencyStats",
    "LayerChange",
    "LayerKey",
    "LayerMetrics",
    "LayerOperatorFlops",
    "LayerRecord",
    "MemorySection",
    "MetricDelta",
    "MetricEvidence",
    "MetricResult",
    "MetricsEvidence",
    "NonNegFloat",
    "NonNegInt",
    "Number",
    "OperatorCount",
    "ParameterStats",
    "PerformanceDelta",
    "PredictionReport",
    "ProfileSection",
    "ProfiledOperator",
    "Provenance",
    "ReportDiff",
    "RssPhase",
    "RssSection",
    "RunContext",
    "RuntimeState",
    "ServedBatching",
    "ServedCapacity",
    "ServedDistribution",
    "ServedReport",
    "ServedTokens",
    "ServedValidity",
    "Severity",
    "Status",
    "StrictNumber",
    "ValueMeta",
    "Verdict",
    "atomic_write_text",
    "check_output_path",
    "clean_stale_temporaries",
    "combine_sum",
    "load_report",
    "report_json_schema",
    "report_of_kind",
    "report_text",
    "save_report",
    "trusted_construct",
    "write_output",
    "write_temporary",
]
