"""``metrics_evidence``: what stands behind each value of a committed metrics file.

``metrics/<stage>.json`` holds bare numbers (what ``dvc metrics diff`` reads). Its sidecar
``metrics/<stage>.evidence.json`` is this report kind: for each key of the metrics file, the
status of the value and the validity warnings that qualify it (one block, the timing
backstop, a loaded host, too few rounds, an inconclusive comparison). It is committed beside
the metrics, so ``history`` and a reader of ``dvc metrics diff`` can weigh a point without the
DVC cache.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .metric import FiniteFloat, Status, _Model
from .models import Verdict, _Report


class MetricEvidence(_Model):
    """The evidence behind one metrics key.

    ``warnings`` are the stable diagnostic codes that qualify the value (empty: clean).
    ``verdict`` and ``interval`` are set for comparison metrics only: the row's verdict and,
    only when that verdict is confident, its ratio interval (an inconclusive row has none).
    """

    status: Status
    warnings: list[str] = Field(default_factory=list)
    verdict: Verdict | None = None
    interval: tuple[FiniteFloat, FiniteFloat] | None = None
    note: str | None = None  # one line for people (why the value is weak, or None)

    @property
    def clean(self) -> bool:
        """A full point: complete, no validity warning, and no inconclusive verdict."""
        return (
            self.status == "complete"
            and not self.warnings
            and self.verdict not in ("inconclusive", "withheld", "not_comparable")
        )


SIDECAR_SUFFIX = ".evidence.json"
"""``metrics/<stage>.json``'s sidecar is ``metrics/<stage>.evidence.json`` (not a metrics file:
readers of ``metrics/*.json`` skip names ending in this)."""


class MetricsEvidence(_Report):
    """The sidecar of one stage's metrics file: one :class:`MetricEvidence` per key."""

    kind: Literal["metrics_evidence"] = "metrics_evidence"
    stage: str
    metrics: dict[str, MetricEvidence] = Field(default_factory=dict)
