"""View pieces every page shares: overall status, diagnostics, provenance, reasons."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..report import Diagnostic, MetricResult, Provenance, Status

_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass(slots=True)
class DiagnosticsView:
    """Diagnostics sorted by severity, with counts for the status strip."""

    items: list[Diagnostic]
    counts: dict[str, int] = field(default_factory=dict)


def diagnostics_view(diagnostics: list[Diagnostic]) -> DiagnosticsView:
    items = sorted(diagnostics, key=lambda d: (_SEVERITY_ORDER.get(d.severity, 3), d.code))
    counts: dict[str, int] = {}
    for item in items:
        counts[item.severity] = counts.get(item.severity, 0) + 1
    return DiagnosticsView(items=items, counts=counts)


def overall_status(results: list[MetricResult | None]) -> Status:
    """complete when every present headline result is; unavailable when none has a number."""
    present = [r for r in results if r is not None]
    if not present or all(r.status == "unavailable" for r in present):
        return "unavailable"
    if all(r.status == "complete" for r in present):
        return "complete"
    return "partial"


def reason_for(diagnostics: list[Diagnostic], metric: str, path: str | None = None) -> str | None:
    """Why ``metric`` (optionally at layer ``path``) is incomplete, from the diagnostics."""
    messages: list[str] = []
    for diag in diagnostics:
        if path is not None and diag.path != path:
            continue
        named = diag.metric
        listed = named.split(",") if named is not None else []  # "module_flops,dmas"
        if named is None or any(m == metric or m.endswith("." + metric) for m in listed):
            if named is None and path is None:
                continue
            messages.append(f"{diag.code}: {diag.message}")
    if not messages:
        return None
    more = f" (+{len(messages) - 2} more)" if len(messages) > 2 else ""
    return "; ".join(messages[:2]) + more


@dataclass(slots=True)
class ProvenanceView:
    rows: list[tuple[str, str]]
    environment: list[tuple[str, str]]
    runtime: list[tuple[str, str]]
    config_json: str | None


def _text(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True, default=str) if value else "—"
    return str(value)


def provenance_view(provenance: Provenance) -> ProvenanceView:
    """Config, revisions, seed, git state and environment, as label/value rows."""
    rows: list[tuple[str, str]] = [
        ("package version", provenance.package_version),
        ("torch version", _text(provenance.torch_version)),
        ("environment hash", provenance.env_hash),
    ]
    run = provenance.run
    config_json: str | None = None
    if run is not None:
        rows += [
            ("model", _text(run.model_name)),
            ("model revision", _text(run.model_revision)),
            ("input", _text(run.input_name)),
            ("input revision", _text(run.input_revision)),
            ("seed", _text(run.seed)),
            ("stage", _text(run.stage)),
            ("git commit", _text(run.git_commit)),
            ("git dirty", _text(run.git_dirty)),
        ]
        if run.config:
            config_json = json.dumps(run.config, indent=2, sort_keys=True, default=str)
    env = provenance.environment.model_dump(mode="json")
    environment = [(key.replace("_", " "), _text(value)) for key, value in env.items()]
    runtime: list[tuple[str, str]] = []
    if provenance.runtime is not None:
        runtime = [
            (key.replace("_", " "), _text(value))
            for key, value in provenance.runtime.model_dump(mode="json").items()
        ]
    return ProvenanceView(
        rows=rows, environment=environment, runtime=runtime, config_json=config_json
    )


def pretty(value: Any) -> str:
    """Any JSON-able value as compact text for a table cell."""
    return _text(value)
