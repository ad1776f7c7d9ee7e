"""``load_report``: any report kind from a path, bytes or JSON text, refused in one line if bad."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from .codec import build_layers, expand_layers, share_metric_maps
from .consistency import check_analysis
from .history import HistoryReport
from .io import _parse, _read_source
from .kinds import REPORT_TYPES
from .metric import READABLE_VERSIONS, SCHEMA_VERSION
from .models import (
    AnalysisReport,
    BaseReport,
    BenchmarkComparison,
    BenchmarkReport,
    FlopReport,
    PredictionReport,
    ReportDiff,
)


def _first_error(error: ValidationError) -> str:
    """The first validation error as ``field.path: message`` (and how many more there are)."""
    errors: list[ErrorDetails] = error.errors(include_url=False)
    first = errors[0]
    location = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{location}: {first['msg']}{more}"


def load_report(
    path_or_text: str | os.PathLike[str] | bytes,
) -> (
    AnalysisReport
    | FlopReport
    | BenchmarkReport
    | ReportDiff
    | BenchmarkComparison
    | PredictionReport
    | HistoryReport
):
    """Load any report kind from a path or JSON text; refuse anything it cannot vouch for.

    Every refusal is one ``ValueError`` naming the file (or ``<text>``) and what is wrong:
    a directory, unreadable or non-UTF-8 file, malformed or too deeply nested JSON, an
    unknown kind, another schema version, or the path of the first invalid field.
    """
    text, where = _read_source(path_or_text)
    document = _parse(text, where)
    if not isinstance(document, dict):
        raise ValueError(f"{where}: not a torchscan_stages report (top level is not an object)")
    if "kind" not in document or "schema_version" not in document:
        raise ValueError(
            f"{where}: not a torchscan_stages report (no 'kind' and 'schema_version' fields)"
        )
    kind = document["kind"]
    if not isinstance(kind, str) or kind not in REPORT_TYPES:
        raise ValueError(
            f"{where}: unknown report kind {kind!r}; expected one of {sorted(REPORT_TYPES)}"
        )
    version = document["schema_version"]
    if type(version) is not int or version not in READABLE_VERSIONS:
        readable = " or ".join(str(v) for v in READABLE_VERSIONS)
        raise ValueError(
            f"{where}: unsupported schema_version {version!r} for kind {kind!r}; "
            f"this version of torchscan_stages reads schema_version {readable} "
            "(re-create the report with this version)"
        )
    document["schema_version"] = SCHEMA_VERSION  # same fields: held as the current version
    try:
        return _validate(kind, version, document)  # type: ignore[return-value]
    except ValidationError as error:
        raise ValueError(f"{where}: invalid {kind} report at {_first_error(error)}") from None
    except ValueError as error:  # codec.LayoutError: columns that do not fit together
        raise ValueError(f"{where}: invalid {kind} report at {error}") from None
    except RecursionError:
        raise ValueError(f"{where}: invalid {kind} report: nested too deeply") from None


R = TypeVar("R", bound=BaseReport)


def report_of_kind(report: Any, kind: type[R], refusal: Callable[[str], str]) -> R:
    """``report`` as a ``kind`` report: the object itself, or loaded from its JSON path.

    Anything else is a TypeError whose message ``refusal(got)`` builds from what was given
    (its report kind, or its type's name), so each caller names its own argument.
    """
    if isinstance(report, (str, os.PathLike)):
        report = load_report(report)
    if isinstance(report, kind):
        return report
    raise TypeError(refusal(getattr(report, "kind", type(report).__name__)))


def _validate(kind: str, version: int, document: dict[str, Any]) -> BaseReport:
    """The report of a document: compact analysis layers decoded fast, the rest by pydantic."""

    share_metric_maps(kind, document)
    if version >= 2 and kind == "analysis" and isinstance(document.get("layers"), dict):
        return load_compact_analysis(document)
    return REPORT_TYPES[kind].model_validate(document)


def report_json_schema(kind: str) -> dict[str, Any]:
    """JSON Schema of one report kind."""
    if kind not in REPORT_TYPES:
        raise ValueError(f"unknown report kind {kind!r}; expected one of {sorted(REPORT_TYPES)}")
    return REPORT_TYPES[kind].model_json_schema()


def load_compact_analysis(document: dict[str, Any]) -> AnalysisReport:
    """An AnalysisReport from a document whose ``layers`` is a columns object.

    Raises :class:`~.codec.LayoutError` or pydantic's ``ValidationError`` (with the field path).
    """
    layers = build_layers(document["layers"])
    if layers is None:  # a column the exact checks do not vouch for: pydantic judges records
        document["layers"] = expand_layers(document["layers"])
        return AnalysisReport.model_validate(document)
    document["layers"] = []
    report = AnalysisReport.model_validate(document)
    check_analysis(layers, report.totals)  # the records were vouched for column by column
    report.layers = layers
    return report
