"""One rule for the row, its table line and the gate: every path the verdict can take (the
interval, too few rounds, no interval, the busy host, the loaded-host rule, the A/A control,
a failed check, a saved pair that is not comparable, saved reports' lower deciles) is
walked, and the page's row, the Markdown table's line and the gate must say the same.

Injected rounds and synthetic block times only (tests/noise_models.py, latency_reports.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from latency_reports import BASE, latency_report
from noise_models import preempted, quiet, simulate

from torchscan_stages.compare.benchmarks import compare_benchmarks
from torchscan_stages.compare.deltas import Judge, withhold
from torchscan_stages.compare.gate import gate, gate_row
from torchscan_stages.compare.judging import paired_deltas
from torchscan_stages.provenance import build_provenance
from torchscan_stages.render.bench_view import comparison_view
from torchscan_stages.render.compare_markdown import comparison_markdown, gate_markdown
from torchscan_stages.render.verdicts import SHORT_REASON, short_reason, statistic_text
from torchscan_stages.report import BenchmarkComparison, CheckResult, PerformanceDelta

T = 1.05  # --max-slowdown


def _busy(run):  # type: ignore[no-untyped-def]
    for trace in run.traces:  # every block lost the CPU: no undisturbed round
        trace.involuntary[:] = [1] * len(trace.involuntary)
    return run


def _paired(  # type: ignore[no-untyped-def]
    truth: float, host=None, rounds: int = 200, judge: Judge | None = None, busy: bool = False
):
    def build() -> list[PerformanceDelta]:
        run = simulate(truth, host or quiet(), rounds=rounds, seed=1)
        return [
            paired_deltas(_busy(run) if busy else run, judge or Judge(), "wall_clock", None).latency
        ]

    return build


def _aa_decided() -> list[PerformanceDelta]:
    run = simulate(1.3, quiet(), seed=4)
    run.control_blocks[:] = [1.1 * b for b in run.baseline_blocks]  # the control 10% slower
    return [paired_deltas(run, Judge(), "wall_clock", None).latency]


def _withheld() -> list[PerformanceDelta]:
    check = CheckResult(performed=True, passed=False, detail="max abs diff 0.5 > atol 1e-05")
    return withhold(_paired(1.3)(), check)


def _saved(cand: list[float], base: list[float] = BASE) -> Callable[[], list[PerformanceDelta]]:
    def build() -> list[PerformanceDelta]:
        result = compare_benchmarks(latency_report(base, "base"), latency_report(cand, "cand"))
        return [d for d in result.deltas if d.metric == "latency.warmed"]

    return build


def _not_comparable() -> list[PerformanceDelta]:
    (delta,) = _saved([3 * t for t in BASE])()
    why = "device is different: baseline='cpu', candidate='cuda:0'"
    return [delta.model_copy(update={"verdict": "not_comparable", "reason": why})]


# path -> (deltas, the row's verdict label, the gate's exit code)
PATHS: dict[str, tuple[Callable[[], list[PerformanceDelta]], str, int]] = {
    "interval: slower": (_paired(1.3), "slower", 1),
    "interval: faster": (_paired(0.7), "faster", 0),
    "interval: no difference": (_paired(1.0), "no_difference", 0),
    # 1.03 with a 5% minimum effect and 2% jitter on 12 rounds: the interval reaches past 1.05
    "interval: undecided": (_paired(1.03, preempted(0.0), rounds=12), "inconclusive", 3),
    "fewer than min_blocks rounds": (_paired(3.0, rounds=8), "inconclusive", 3),
    "too few rounds for an interval": (
        _paired(3.0, rounds=5, judge=Judge(min_blocks=3)),
        "inconclusive",
        3,
    ),
    "busy host, within the load": (
        _paired(1.3, preempted(0.9, 4e-3), busy=True),
        "inconclusive",
        3,
    ),
    "busy host, beyond the load": (
        _paired(3.0, preempted(0.9, 1e-3), rounds=40, busy=True),
        "slower (loaded host)",
        1,
    ),
    "A/A control decided": (_aa_decided, "inconclusive", 3),
    "output check failed": (_withheld, "withheld", 1),  # the failed check fails the gate
    "not comparable": (_not_comparable, "not_comparable", 3),
    "saved: slower": (_saved([3 * t for t in BASE]), "slower", 1),
    "saved: same": (_saved(BASE), "no_difference", 0),
    # the case: 2.6x slower, CI [2.54, 2.76], but 5 blocks, fewer than min_blocks 10
    "saved: fewer than min_blocks": (
        _saved([2.6 * t for t in BASE[:5]], BASE[:5]),
        "inconclusive",
        3,
    ),
}


@pytest.mark.parametrize("path", list(PATHS))
def test_row_table_line_and_gate_agree(path: str) -> None:
    build, label, exit_code = PATHS[path]
    deltas = build()
    latency = deltas[0]
    result = BenchmarkComparison(
        provenance=build_provenance(),
        check=CheckResult(performed=True, passed=path != "output check failed"),
        deltas=deltas,
    )
    # the page's row
    row = comparison_view(result).rows[0]
    assert row.verdict == label, latency.reason
    assert row.reason == short_reason(latency.reason) and len(row.reason) <= SHORT_REASON
    # the Markdown table's line: metric | statistic | base | cand | ratio | CI | verdict | why
    text = comparison_markdown(result)
    [line] = [x for x in text.splitlines() if x.startswith("| latency.warmed |")]
    cells = [c.strip() for c in line.strip("|").split(" | ")]
    assert "| metric | statistic | baseline | candidate |" in text  # the table names it
    assert cells[1] == statistic_text(latency)  # e.g. "lower decile of per-call block averages"
    assert cells[6] == ("**WITHHELD**" if label == "withheld" else label)
    assert cells[7] == (row.reason or "—")
    # the gate: from the row's verdict only
    outcome = gate(result, T)
    decision = gate_row(latency, T)
    assert outcome.exit_code == exit_code, (outcome, latency.reason)
    block = gate_markdown(outcome.violations, outcome.unverified, outcome.passed, T)
    if latency.verdict in ("inconclusive", "withheld", "not_comparable") or latency.withheld:
        assert decision.outcome == "cannot_verify"
        assert (latency.reason or "") in block  # the row's own reason, in full
        if path == "output check failed":  # the check fails the gate; latency cannot verify
            assert outcome.violations == ["the output check failed"]
            assert f"- cannot verify: {decision.reason}" in block
        else:
            assert "Gate: FAILED" not in block and "**Gate: CANNOT VERIFY**" in block
    elif exit_code == 1:
        assert latency.verdict == "slower" and latency.ratio is not None and latency.ratio > T
        assert "**Gate: FAILED**" in block and decision.outcome == "failed"
    if exit_code == 0:
        assert latency.verdict in ("faster", "no_difference", "slower")
        assert latency.ci_high is not None and latency.ci_high <= T
        assert "**Gate: passed**" in block


def test_every_verdict_is_walked() -> None:
    labels = {label.split(" ")[0] for _, label, _ in PATHS.values()}
    assert labels == {
        "slower",
        "faster",
        "no_difference",
        "inconclusive",
        "withheld",
        "not_comparable",
    }
