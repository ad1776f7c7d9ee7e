"""View pieces every page shares: overall status, diagnostics, provenance, reasons."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..report import Diagnostic, MetricResult, Provenance, Status

_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass(slots=True)
class DiagnosticGroup:
    """Layer diagnostics of one severity, code and metric: how many, and one example."""

    severity: str
    code: str
    metric: str | None
    count: int
    first: Diagnostic


@dataclass(slots=True)
class DiagnosticsView:
    """Diagnostics sorted by severity, with counts for the status strip.

    With ``groups`` set (a large report) ``items`` holds only the diagnostics without a
    layer path; those with one are counted in ``groups`` and listed by the page's script.
    """

    items: list[Diagnostic]
    counts: dict[str, int] = field(default_factory=dict)
    groups: list[DiagnosticGroup] | None = None


def diagnostics_view(diagnostics: list[Diagnostic], group_paths: bool = False) -> DiagnosticsView:
    items = sorted(diagnostics, key=lambda d: (_SEVERITY_ORDER.get(d.severity, 3), d.code))
    counts: dict[str, int] = {}
    for item in items:
        counts[item.severity] = counts.get(item.severity, 0) + 1
    if not group_paths:
        return DiagnosticsView(items=items, counts=counts)
    groups: dict[tuple[str, str, str | None], DiagnosticGroup] = {}
    for item in items:
        if item.path is None:
            continue
        key = (item.severity, item.code, item.metric)
        group = groups.get(key)
        if group is None:
            groups[key] = DiagnosticGroup(item.severity, item.code, item.metric, 1, item)
        else:
            group.count += 1
    unpathed = [item for item in items if item.path is None]
    return DiagnosticsView(items=unpathed, counts=counts, groups=list(groups.values()))


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
    # on an index page: the rows shown are only this report's differences from the shared
    # provenance (anchor ``shared``); ``config_keys`` names the config sections it read
    shared: str | None = None
    config_keys: list[str] = field(default_factory=list)


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


_FRACTION_KEYS = ("min_effect", "max_noise", "ci_floor", "relative_iqr", "noise_threshold")


def setting_text(key: str, value: Any) -> str:
    """A measurement setting for people: seconds with units, fractions as percentages,
    counts with separators (``warmup_s=0.2`` -> ``200 ms``, ``min_effect=0.05`` -> ``5 %``)."""
    from .format import seconds, thousands

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _text(value)
    if key.endswith("_s") or key in ("warmup", "min_run_time", "max_run_time", "timeout"):
        return seconds(value)
    if key == "confidence" or any(key.endswith(f) for f in _FRACTION_KEYS):
        return f"{value * 100:.3g} %"
    return thousands(value)


def _common(lists: list[list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """Rows present, with the same value, in every list (order of the first)."""
    if not lists:
        return []
    rest = [set(rows) for rows in lists[1:]]
    return [row for row in lists[0] if all(row in other for other in rest)]


def _merged_config(configs: list[dict[str, Any]]) -> tuple[dict[str, Any], set[str]]:
    """Union of the reports' config sections; keys whose values disagree are left out."""
    merged: dict[str, Any] = {}
    conflicts: set[str] = set()
    for config in configs:
        for key, value in config.items():
            if key in merged and merged[key] != value:
                conflicts.add(key)
            merged.setdefault(key, value)
    for key in conflicts:
        merged.pop(key, None)
    return merged, conflicts


def shared_provenance(
    provenances: list[Provenance], anchor: str
) -> tuple[ProvenanceView | None, list[ProvenanceView]]:
    """For an index page: what every report shares (shown once) and, per report, only what
    differs from it. With one report, or nothing shared, each report keeps its own view."""
    views = [provenance_view(p) for p in provenances]
    if len(views) < 2:
        return None, views
    rows = _common([v.rows for v in views])
    environment = _common([v.environment for v in views])
    runtime = _common([v.runtime for v in views])
    configs = [p.run.config if p.run is not None else {} for p in provenances]
    merged, conflicts = _merged_config(configs)
    if not (rows or environment or runtime or merged):
        return None, views
    shared = ProvenanceView(
        rows=rows,
        environment=environment,
        runtime=runtime,
        config_json=json.dumps(merged, indent=2, sort_keys=True, default=str) if merged else None,
    )
    reduced: list[ProvenanceView] = []
    for view, config in zip(views, configs, strict=True):
        own = {key: config[key] for key in sorted(conflicts) if key in config}
        reduced.append(
            ProvenanceView(
                rows=[row for row in view.rows if row not in rows],
                environment=[row for row in view.environment if row not in environment],
                runtime=[row for row in view.runtime if row not in runtime],
                config_json=json.dumps(own, indent=2, sort_keys=True, default=str) if own else None,
                shared=anchor,
                config_keys=sorted(config),
            )
        )
    return shared, reduced
