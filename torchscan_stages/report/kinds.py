"""Every report kind the package writes, listed once.

``AnyReport`` is the one listing: a discriminated union on ``kind``. ``REPORT_TYPES`` (kind
name -> model, for ``load_report``) and ``ReportKind`` are derived from it, so adding a kind
is one line here and nowhere else (the loader, the renderer and the tests read these).
"""

from __future__ import annotations

from typing import Annotated, Any, TypeAlias, get_args

from pydantic import Field

from .evidence import MetricsEvidence
from .fingerprint import EnvironmentReport, SourcesReport
from .history import HistoryReport
from .models import (
    AnalysisReport,
    BenchmarkComparison,
    BenchmarkReport,
    FlopReport,
    PredictionReport,
    ReportDiff,
    _Report,
)
from .served import ServedCapacity, ServedReport
from .sweep import JobStatus, SweepSummary

AnyReport: TypeAlias = Annotated[
    AnalysisReport
    | FlopReport
    | BenchmarkReport
    | ReportDiff
    | BenchmarkComparison
    | PredictionReport
    | HistoryReport
    | ServedReport
    | ServedCapacity
    | MetricsEvidence
    | SweepSummary
    | JobStatus
    | EnvironmentReport
    | SourcesReport,
    Field(discriminator="kind"),
]


def _kind_of(model: Any) -> str:
    kind = model.model_fields["kind"].default
    if not isinstance(kind, str):
        raise TypeError(f"{model.__name__}.kind has no literal default")
    return kind


REPORT_TYPES: dict[str, type[_Report]] = {
    _kind_of(model): model for model in get_args(get_args(AnyReport)[0])
}
# the kind names, in listing order (a plain tuple: the union above is the typed form)
REPORT_KINDS: tuple[str, ...] = tuple(REPORT_TYPES)
