"""The rss child's phase records, read and judged against what the OS showed the parent.

A record is the child's own claim (``mark_phase`` writes it; anything else may write the
file too). :func:`read_phases` turns each line into an :class:`RssPhase`, a line that is not
a ``mark_phase`` record into an ``rss_phase_unreadable`` diagnostic. :func:`refuse_claims`
keeps a claim only with OS evidence for it: the parent's own reading of the marking
process's ``VmHWM`` before the reset (``rss_sampler.PhaseWitness``), or, for a record the
parent could not witness (written by hand, by a process outside the handshake, off Linux),
no more than the highest figure the OS gave for the child. A refused claim is
``unavailable`` plus ``rss_phase_above_os``, never a complete peak.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..report import Diagnostic, MetricResult, RssPhase


@dataclass
class PhaseRecords:
    """The phases read, and the file line (0-based) each came from."""

    phases: list[RssPhase] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)


def _unreadable(number: int, line: str, why: str) -> Diagnostic:
    return Diagnostic(
        code="rss_phase_unreadable",
        metric="rss.phases",
        message=f"phase record {number} is not a mark_phase record ({why}): {line[:200]!r}",
    )


def read_phases(path: Path, diagnostics: list[Diagnostic]) -> PhaseRecords:
    """The child's phase records, one per line (``\\n``, as the parent's witness counts)."""
    found = PhaseRecords()
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError:
        return found
    if lines and not lines[-1]:
        lines.pop()  # the newline that ends the last record
    previous_reset = True
    for index, raw in enumerate(lines):
        number, line = index + 1, raw.decode("utf-8", errors="replace")
        try:
            record = json.loads(raw.decode("utf-8"))
            name, peak = record["name"], record["peak_bytes"]
            reset = record.get("reset", False)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
            why = "not UTF-8" if isinstance(error, UnicodeDecodeError) else "not a JSON object"
            diagnostics.append(_unreadable(number, line, why))
            continue
        if not isinstance(name, str) or not isinstance(reset, bool):
            diagnostics.append(_unreadable(number, line, "name or reset of a wrong type"))
            continue
        if peak is not None and (type(peak) is not int or peak < 0):
            diagnostics.append(_unreadable(number, line, "peak_bytes is not a byte count"))
            peak = None
        scope = "process_rss_phase" if previous_reset else "process_rss_since_start"
        method = "os_vmhwm" if record.get("method") == "vmhwm" else "os_ru_maxrss"
        if peak is not None:
            result = MetricResult.complete(peak, unit="bytes", scope=scope, method=method)
        else:
            result = MetricResult.unavailable(unit="bytes", scope=scope, method=method)
        found.phases.append(RssPhase(name=name, peak_rss=result))
        found.lines.append(index)
        previous_reset = reset
    return found


def _refusal(
    phase: RssPhase, claim: float, why: str, severity: Literal["error", "warning"]
) -> Diagnostic:
    return Diagnostic(
        code="rss_phase_above_os",
        severity=severity,
        metric="rss.phases",
        message=f"phase {phase.name!r} claims a peak of {claim:.0f} bytes, {why}; the claim is "
        "not counted",
    )


def refuse_claims(
    records: PhaseRecords,
    evidence: Mapping[int, int],
    os_figure: int,
    diagnostics: list[Diagnostic],
) -> bool:
    """Refuse each claim without OS evidence (see the module docstring); True if any was.

    ``evidence``: the parent's ``VmHWM`` reading per file line; ``os_figure``: the highest
    figure the OS gave for the child overall (wait4's ``ru_maxrss``, sampled ``VmHWM`` and
    tree RSS).
    """
    refused = False
    for index, (phase, line) in enumerate(zip(records.phases, records.lines, strict=True)):
        claim = phase.peak_rss.value
        if claim is None:
            continue
        seen = evidence.get(line)
        if seen is not None and claim <= seen:
            continue  # the parent read at least this much itself, before the reset
        if seen is None and claim <= os_figure:
            continue  # not witnessed, but within what the OS showed for the child
        if seen is not None:  # the parent's own reading contradicts it: wrong, not unseen
            why = f"above the parent's own reading of that process's VmHWM ({seen} bytes)"
            diagnostic = _refusal(phase, claim, why, "error")
        else:
            why = (
                f"above every figure the OS gave for the child ({os_figure} bytes: wait4 "
                "ru_maxrss, sampled VmHWM and RSS), and the parent did not witness it (a "
                "record written by hand, or by a process outside mark_phase's handshake)"
            )
            diagnostic = _refusal(phase, claim, why, "warning")
        refused = True
        result = phase.peak_rss
        unavailable = MetricResult.unavailable(
            unit=result.unit, scope=result.scope, method=result.method
        )
        records.phases[index] = phase.model_copy(update={"peak_rss": unavailable})
        diagnostics.append(diagnostic)
    return refused


__all__ = ["PhaseRecords", "read_phases", "refuse_claims"]
