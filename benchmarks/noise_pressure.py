"""The pressure table of bench_noise.py: A/A and known-effect pairs under load the script
makes itself, for compare_benchmarks and torch.utils.benchmark side by side.

For each pressure (0, 1, 2, 4, 8, 16 busy-loop processes on the available cores, plain and
at nice 19) and each pair (A/A, 1.05x, 1.3x, 2x busy loops of 1 ms: a busy loop spins on
time.perf_counter until its deadline, so the true ratio is known by construction), it runs
``runs`` comparisons and prints: wrong verdicts (A/A faster/slower; an effect judged faster
or no_difference), detections (slower), interval coverage of the true ratio where a verdict
was given, the median time to a verdict, the host pressure it measured (PSI, the
workload's CPU share, the background load average), and for torch.utils.benchmark given
the same time: how often its interquartile ranges separate in the wrong or right direction
(it gives no verdict of its own; separated IQRs beyond the minimum effect is the reading a
user would make), and through pyperf (``pyperf_pair.py``: each side a ``--fast`` run,
the verdict from ``pyperf compare_to``) for the first ``pyperf_runs`` runs of a cell, where
pyperf is installed (benchmarks/.venv). ``cover`` counts the intervals
that hold the nominal ratio, ``cover*`` those that hold it corrected for the loop's overshoot
past its deadline (microseconds a call, measured on the baseline side).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from torch.utils.benchmark import Timer

from torchscan_stages.compare.benchmarks import compare_benchmarks

PAIRS = (("A/A", 1.0), ("1.05x", 1.05), ("1.3x", 1.3), ("2x", 2.0), ("3x", 3.0))
PRESSURES: tuple[tuple[int, bool], ...] = ((0, False), (1, False), (2, False), (4, False))
PRESSURES += ((8, False), (16, False))
PRESSURES += ((1, True), (2, True), (4, True), (8, True), (16, True))
MIN_EFFECT = 0.02
PYPERF_SIDE = Path(__file__).resolve().parent / "pyperf_pair.py"


@dataclass
class Cell:
    """Counts of one (pressure, pair) cell, for one method."""

    runs: int = 0
    wrong: int = 0
    detected: int = 0
    decided: int = 0
    covered: int = 0
    covered_corrected: int = 0
    seconds: list[float] = field(default_factory=list)

    def add(
        self,
        truth: float,
        verdict: str,
        interval: tuple[float | None, float | None],
        took: float,
        overshoot: float = 0.0,
    ) -> None:
        """``overshoot``: milliseconds a busy-loop call runs past its deadline (the last
        spin and the call itself), measured on the baseline side; two loops' ratio is then
        (truth + overshoot) / (1 + overshoot), not quite ``truth``."""
        low, high = interval
        self.runs += 1
        self.seconds.append(took)
        if truth == 1.0:
            self.wrong += verdict in ("faster", "slower")
        else:
            self.wrong += verdict in ("faster", "no_difference")
            self.detected += verdict == "slower"
        if (
            verdict in ("faster", "slower", "no_difference")
            and low is not None
            and high is not None
        ):
            self.decided += 1
            self.covered += low <= truth <= high
            corrected = (truth + overshoot) / (1.0 + overshoot)
            self.covered_corrected += low <= corrected <= high
        elif verdict in ("faster", "slower", "no_difference"):
            self.decided += 1


def why_inconclusive(reason: str) -> str:
    """Which part of the rule declined: the busy-host refusal, the A/A control, too few
    rounds, or the interval itself."""
    if reason.startswith("host too busy"):
        return "busy"
    if reason.startswith("the A/A control"):
        return "control"
    if reason.startswith("fewer than"):
        return "rounds"
    return "interval"


def _ours(
    base: Callable[[], int], cand: Callable[[], int], seed: int
) -> tuple[str, float | None, float | None, float, dict[str, Any]]:
    started = time.perf_counter()
    result = compare_benchmarks(
        base,
        cand,
        check=lambda a, b: a == b,
        judge={"min_effect": MIN_EFFECT, "ci_floor": 0.005, "seed": seed},
    )
    took = time.perf_counter() - started
    latency = result.deltas[0]
    paired = dict(result.settings.get("paired", {}))
    base_s = latency.baseline.value if latency.baseline is not None else None
    paired["overshoot_ms"] = (base_s * 1e3 - 1.0) if base_s is not None else 0.0
    paired["why"] = (
        why_inconclusive(latency.reason or "") if latency.verdict == "inconclusive" else None
    )
    # a verdict given by the loaded-host rule (compare/loaded.py): the host was busy
    paired["loaded"] = (latency.reason or "").startswith("loaded host")
    paired["stop_reason"] = result.settings.get("stop_reason")
    return latency.verdict, latency.ci_low, latency.ci_high, took, paired


def _theirs(
    base: Callable[[], int], cand: Callable[[], int], seconds: float
) -> tuple[str, float, float]:
    """blocked_autorange on each side, ``seconds / 2`` each; a 'verdict' from separated IQRs."""
    measured = []
    for call in (base, cand):
        timer = Timer(stmt="call()", globals={"call": call}, num_threads=1)
        measured.append(timer.blocked_autorange(min_run_time=max(0.2, seconds / 2)))
    b, c = measured
    ratio = c.median / b.median
    verdict = "inconclusive"
    apart = c._p25 > b._p75 or c._p75 < b._p25
    if apart and abs(ratio - 1.0) > MIN_EFFECT:
        verdict = "slower" if ratio > 1.0 else "faster"
    elif not apart and b._p75 / b._p25 - 1 < MIN_EFFECT and abs(ratio - 1.0) < MIN_EFFECT / 2:
        verdict = "no_difference"
    return verdict, ratio, ratio


def pyperf_installed() -> bool:
    try:
        import pyperf  # noqa: F401
    except ImportError:
        return False
    return True


def _pyperf(truth: float) -> tuple[str, float, float]:
    """The pair through pyperf as its users run it: each side in its own ``--fast`` run
    (10 worker processes x 2 values after a warm-up, ~0.1 s a value), one after the other,
    then ``pyperf compare_to``. Its verdict: "Not significant" (its t-test) is
    ``inconclusive``; "N.NNx slower/faster" is that direction when beyond MIN_EFFECT (the
    reading applied to torch.utils.benchmark too), else ``inconclusive``.
    Returns (verdict, ratio, seconds for both sides)."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pyperf_pair_") as folder:
        sides = []
        for name, ms in (("base", 1.0), ("cand", truth)):
            out = Path(folder) / f"{name}.json"
            side = [str(PYPERF_SIDE), "--fast", "--quiet", "-o", str(out), "--ms", repr(ms)]
            subprocess.run(
                [sys.executable, *side],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            sides.append(str(out))
        text = subprocess.run(
            [sys.executable, "-m", "pyperf", "compare_to", *sides],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    verdict, ratio = pyperf_reading(text)
    return verdict, ratio, time.perf_counter() - started


def pyperf_reading(text: str) -> tuple[str, float]:
    """(verdict, candidate/baseline ratio) from ``pyperf compare_to`` output: "Benchmark
    hidden because not significant" (its t-test; "Not significant!" after the ratio line
    with ``-v``) or no ratio ("no change") is ``inconclusive``; "N.NNx slower/faster" is
    that direction when beyond MIN_EFFECT."""
    found = re.search(r"([0-9.]+)x (slower|faster)", text)
    if "not significant" in text.lower() or found is None:
        return "inconclusive", 1.0
    factor = float(found.group(1))
    ratio = factor if found.group(2) == "slower" else 1.0 / factor
    return (found.group(2) if abs(ratio - 1.0) > MIN_EFFECT else "inconclusive"), ratio


def _psi_total() -> int | None:
    try:
        with open("/proc/pressure/cpu", encoding="ascii") as handle:
            first = handle.readline().split()
        return int(first[-1].split("=")[1])
    except (OSError, IndexError, ValueError):
        return None


def pressure_table(
    runs: int,
    busy: Callable[[float], Callable[[], int]],
    cpu_load: Callable[..., Any],
    pressures: tuple[tuple[int, bool], ...] = PRESSURES,
    pairs: tuple[tuple[str, float], ...] = PAIRS,
    pyperf_runs: int = 0,
    tub: bool = True,
) -> list[dict[str, Any]]:
    """Every pressure x pair x ``runs``; prints one row per (pressure, pair) as it goes.
    ``pyperf_runs``: the first that many runs of each cell also go through pyperf (one
    pair takes it ~15 s on a quiet host, minutes under load, so it samples fewer); a cell's
    ``psi`` and ``load1`` then cover its pyperf runs too."""
    rows: list[dict[str, Any]] = []
    print(
        f"pressure table: {runs} run(s) per cell, 1 ms busy loops, min_effect {MIN_EFFECT}, "
        f"{psutil.cpu_count()} logical CPUs, pid {os.getpid()}",
        flush=True,
    )
    header = (
        f"{'pressure':<14} {'pair':<6} {'wrong':>5} {'detect':>6} {'cover':>7} {'cover*':>7} "
        f"{'t_med':>6} "
        f"{'load1':>5} {'psi':>5} {'cpu':>5} | tub wrong detect"
    )
    print(header, flush=True)
    for processes, niced in pressures:
        label = f"{processes} busy{' nice19' if niced else ''}"
        limit = len(pairs) * (runs * 20 + min(runs, pyperf_runs) * 300) + 60
        with cpu_load(processes, limit, niced=niced):
            for name, truth in pairs:
                ours, theirs, perf = Cell(), Cell(), Cell()
                why: dict[str, int] = {}
                loaded = 0
                load = psutil.getloadavg()[0]
                psi_start, wall_start = _psi_total(), time.monotonic()
                shares: list[float] = []
                for seed in range(runs):
                    base, cand = busy(1e-3), busy(truth * 1e-3)
                    verdict, low, high, took, paired = _ours(base, cand, seed)
                    ours.add(truth, verdict, (low, high), took, paired["overshoot_ms"])
                    if paired["why"] is not None:
                        why[paired["why"]] = why.get(paired["why"], 0) + 1
                    loaded += bool(paired["loaded"])
                    if paired.get("cpu_share") is not None:
                        shares.append(paired["cpu_share"])
                    if tub:
                        their_verdict, _ratio, _ = _theirs(base, cand, took)
                        theirs.add(truth, their_verdict, (None, None), took)
                    if seed < pyperf_runs:
                        perf_verdict, _ratio, perf_took = _pyperf(truth)
                        perf.add(truth, perf_verdict, (None, None), perf_took)
                psi_end = _psi_total()
                wall = time.monotonic() - wall_start
                psi = (psi_end - psi_start) / (wall * 1e6) if psi_start and psi_end else None
                row = {
                    "pressure": label,
                    "pair": name,
                    "runs": runs,
                    "wrong": ours.wrong,
                    "detected": ours.detected,
                    "decided": ours.decided,
                    "covered": ours.covered,
                    "covered_corrected": ours.covered_corrected,
                    "median_s": statistics.median(ours.seconds),
                    "max_s": max(ours.seconds),
                    "inconclusive_why": why,
                    "loaded_host_verdicts": loaded,
                    "load1": load,
                    "psi_some": psi,
                    "cpu_share": statistics.median(shares) if shares else None,
                    "tub_runs": theirs.runs,
                    "tub_wrong": theirs.wrong,
                    "tub_detected": theirs.detected,
                    "pyperf_runs": perf.runs,
                    "pyperf_wrong": perf.wrong,
                    "pyperf_detected": perf.detected,
                    "pyperf_median_s": statistics.median(perf.seconds) if perf.seconds else None,
                }
                rows.append(row)
                print(_row_text(row), flush=True)
    return rows


def _row_text(row: dict[str, Any]) -> str:
    detect = "-" if row["pair"] == "A/A" else f"{row['detected']}/{row['runs']}"
    tub_detect = "-" if row["pair"] == "A/A" else f"{row['tub_detected']}/{row['runs']}"
    tub_wrong = f"{row['tub_wrong']:>2}/{row['runs']:<2}" if row.get("tub_runs") else "  n/a"
    psi = "n/a" if row["psi_some"] is None else f"{row['psi_some']:.0%}"
    cpu = "n/a" if row["cpu_share"] is None else f"{row['cpu_share']:.2f}"
    return (
        f"{row['pressure']:<14} {row['pair']:<6} {row['wrong']:>2}/{row['runs']:<2} {detect:>6} "
        f"{row['covered']:>3}/{row['decided']:<3} "
        f"{row['covered_corrected']:>3}/{row['decided']:<3} "
        f"{row['median_s']:>5.1f}s {row['load1']:>5.1f} "
        f"{psi:>5} {cpu:>5} | {tub_wrong} {tub_detect if row.get('tub_runs') else 'n/a':>6}"
        f" | t_max {row['max_s']:.1f}s undecided {row['inconclusive_why'] or '-'}"
        f" loaded-host verdicts {row['loaded_host_verdicts']}" + _pyperf_text(row)
    )


def _pyperf_text(row: dict[str, Any]) -> str:
    runs = row.get("pyperf_runs") or 0
    if not runs:
        return ""
    found = "-" if row["pair"] == "A/A" else f"{row['pyperf_detected']}/{runs}"
    return (
        f" | pyperf wrong {row['pyperf_wrong']}/{runs} found {found}"
        f" t_med {row['pyperf_median_s']:.1f}s"
    )


def pyperf_note(pyperf_runs: int) -> str:
    """pyperf is not a dependency of this project; the table says whether it was run."""
    if not pyperf_installed():
        return "pyperf: not installed here, so not run (benchmarks/.venv has it: make bench)"
    if not pyperf_runs:
        return "pyperf: installed, not run (--pyperf-runs 0)"
    return (
        f"pyperf: the first {pyperf_runs} run(s) of each cell, each side a `--fast` run, "
        "read through `pyperf compare_to`"
    )
