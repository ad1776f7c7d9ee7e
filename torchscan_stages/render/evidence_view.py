"""A ``metrics_evidence`` sidecar as a table: one row per committed metrics key, its status,
its validity warnings, and for a comparison's keys the verdict and (confident only) the
interval. A key with warnings or an undecided verdict is marked "weak point": it is not
a full point of a history."""

from __future__ import annotations

from dataclasses import dataclass

from ..report import MetricsEvidence
from .format import DASH


@dataclass(slots=True)
class EvidenceRow:
    key: str
    status: str
    weak: bool
    warnings: str
    verdict: str
    interval: str
    note: str


def evidence_rows(report: MetricsEvidence) -> list[EvidenceRow]:
    return [
        EvidenceRow(
            key=key,
            status=found.status,
            weak=not found.clean,
            warnings=", ".join(found.warnings) or DASH,
            verdict=found.verdict or DASH,
            interval=f"[{found.interval[0]:.4g}, {found.interval[1]:.4g}]"
            if found.interval
            else DASH,
            note=found.note or "",
        )
        for key, found in sorted(report.metrics.items())
    ]
