"""Steps of every series of a History: fitted per comparable segment, never across one.

Only complete points are fitted (a partial value is a lower bound, an unavailable one has
none), and a step is *confident* only when the clean points alone show it: points with a
validity warning (one block, the timing backstop, a loaded host, too few rounds, an
inconclusive compare) or without recorded evidence are weak. A step the fit finds only
with weak points is reported as *suspect* ("needs a quiet rerun"), with the warned commits
it rests on and the command that reruns their stage; it never fails the gate. Each step lies
in the commit range after the last point before it up to the first point after it, which is
one commit only when those two commits are adjacent.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from .cache import cache_dir
from .points import Point
from .series import History, Series
from .steps import DEFAULT_CONFIDENCE, FitStep, fit_steps

_Z95 = 1.96  # the points' intervals are 95% intervals


@dataclass(slots=True)
class Step:
    metric: str
    segment: int
    before: str  # last commit measured before the step
    after: str  # first commit measured after it
    commits: list[str]  # the range it lies in: after `before`, up to and including `after`
    single_commit: bool
    ratio: float
    ci_low: float
    ci_high: float
    confidence: float
    direction: str  # "increased" / "decreased"
    worse: bool  # in the metric's bad direction (higher, except a throughput)
    beyond_min_effect: bool | None  # None: no minimum effect set (the default: report only)
    suspect: bool = False  # found only with weak points: needs a quiet rerun, never gated
    rests_on: list[str] = field(default_factory=list)  # the weak points' commits
    warnings: list[str] = field(default_factory=list)  # their warning codes, once each
    rerun: str | None = None  # the shell command that measures those commits again


def higher_is_better(name: str) -> bool:
    """Throughputs (``*_per_s``) improve upwards; latency, memory, FLOPs downwards."""
    return name.endswith("_per_s")


def _sigma(point: Point) -> float | None:
    if point.low is None or point.high is None:
        return None
    return (point.high - point.low) / (2.0 * _Z95)


def _step(
    history: History,
    series: Series,
    number: int,
    fitted: list[Point],
    fit: FitStep,
    min_effect: float | None,
) -> Step:
    shas = [c.sha for c in history.commits]
    before, after = fitted[fit.before], fitted[fit.after]
    increased = fit.ratio > 1.0
    beyond = None
    if min_effect is not None:
        beyond = fit.ci_low > 1.0 + min_effect or fit.ci_high < 1.0 - min_effect
    return Step(
        metric=series.metric,
        segment=number,
        before=before.commit,
        after=after.commit,
        commits=shas[before.index + 1 : after.index + 1],
        single_commit=after.index == before.index + 1,
        ratio=fit.ratio,
        ci_low=fit.ci_low,
        ci_high=fit.ci_high,
        confidence=fit.confidence,
        direction="increased" if increased else "decreased",
        worse=increased != higher_is_better(series.name),
        beyond_min_effect=beyond,
    )


def _fit(points: list[Point], confidence: float, penalty: float | None) -> list[FitStep]:
    return fit_steps(
        [float(p.value) for p in points if p.value is not None],
        [_sigma(p) for p in points],
        penalty=penalty,
        confidence=confidence,
    )


def rerun_command(repo: str, stage: str, commits: list[str]) -> str:
    """Shell lines that measure ``stage`` again at each commit, in a temporary worktree
    sharing the DVC cache (``--force``: the recorded result is the one in doubt); each
    report is kept as ``/tmp/rerun-COMMIT-STAGE.json`` to compare with ``compare``."""
    cache = shlex.quote(str(cache_dir(repo).resolve()))  # the worktree is elsewhere
    root = shlex.quote(str(Path(repo).resolve()))
    shas = " ".join(c[:12] for c in commits)
    return (
        f"cd {root} && for c in {shas}; do t=$(mktemp -d) && "
        f'git worktree add -q --detach "$t/tree" "$c" && (cd "$t/tree" && '
        f"dvc cache dir --local {cache} && dvc repro -q --force {shlex.quote(stage)} && "
        f'cp reports/{shlex.quote(stage)}.json "/tmp/rerun-$c-{shlex.quote(stage)}.json"); '
        f'git worktree remove --force "$t/tree"; done'
    )


def _suspects(
    history: History,
    series: Series,
    number: int,
    fitted: list[Point],
    confident: list[Step],
    args: tuple[float, float | None, float | None],
) -> list[Step]:
    """Steps the fit finds with the weak points too, that no confident step explains:
    each rests on the weak points of the two levels beside it."""
    confidence, penalty, min_effect = args
    found = _fit(fitted, confidence, penalty)
    out = []
    for k, fit in enumerate(found):
        step = _step(history, series, number, fitted, fit, min_effect)
        if any(_overlap(step, c) and c.direction == step.direction for c in confident):
            continue
        first = found[k - 1].after if k > 0 else 0
        last = found[k + 1].before if k + 1 < len(found) else len(fitted) - 1
        weak = [p for p in fitted[first : last + 1] if not p.clean]
        if not weak:
            continue  # all clean beside it, yet not confident on the clean points: no step
        step.suspect, step.beyond_min_effect = True, None
        step.rests_on = [p.commit for p in weak]
        step.warnings = list(dict.fromkeys(w for p in weak for w in p.warnings))
        deciding = _deciding(fitted, fit, first, last)
        step.rerun = rerun_command(history.repo, series.stage, [p.commit for p in deciding])
        out.append(step)
    return out


def _deciding(fitted: list[Point], fit: FitStep, first: int, last: int) -> list[Point]:
    """The weak points whose quiet rerun decides the step: its two sides where weak, else
    the weak point nearest it on each side (a whole history without evidence is never
    rerun commit by commit)."""
    sides = [fitted[fit.before], fitted[fit.after]]
    if any(not p.clean for p in sides):
        return [p for p in sides if not p.clean]
    before = next((p for p in reversed(fitted[first : fit.before]) if not p.clean), None)
    after = next((p for p in fitted[fit.after + 1 : last + 1] if not p.clean), None)
    return [p for p in (before, after) if p is not None]


def _overlap(a: Step, b: Step) -> bool:
    return bool(set(a.commits) & set(b.commits))


def series_steps(
    history: History,
    series: Series,
    *,
    min_effect: float | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    penalty: float | None = None,
) -> list[Step]:
    """The steps of one series, segment by segment: confident ones from the clean points,
    then the suspect ones that only the weak points show."""
    steps: list[Step] = []
    for number, segment in enumerate(series.segments):
        fitted = [p for p in series.points[segment.start : segment.stop]
                  if p.status == "complete" and p.value is not None and p.value > 0]  # fmt: skip
        clean = [p for p in fitted if p.clean]
        confident = [_step(history, series, number, clean, fit, min_effect)
                     for fit in _fit(clean, confidence, penalty)]  # fmt: skip
        args = (confidence, penalty, min_effect)
        suspect = _suspects(history, series, number, fitted, confident, args)
        steps += sorted(confident + suspect, key=lambda s: history_index(history, s.after))
    return steps


def history_index(history: History, sha: str) -> int:
    return next(i for i, c in enumerate(history.commits) if c.sha == sha)


def detect_steps(
    history: History,
    *,
    min_effect: float | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    penalty: float | None = None,
) -> list[Step]:
    """Fill every series' ``steps`` and return them all. ``min_effect`` (a ratio change,
    e.g. 0.1 for 10%) only marks steps whose whole interval lies beyond it; default off."""
    if min_effect is not None and not 0.0 <= min_effect < 1.0:
        raise ValueError(f"min_effect must be in [0, 1), got {min_effect!r}")
    found: list[Step] = []
    for series in history.series:
        series.steps = series_steps(
            history, series, min_effect=min_effect, confidence=confidence, penalty=penalty
        )
        found += series.steps
    return found


def gate_failures(steps: list[Step]) -> list[Step]:
    """Steps that fail a gate: confident, in the bad direction, beyond the owner's minimum
    (a suspect step never does: it needs a quiet rerun first)."""
    return [s for s in steps if s.worse and s.beyond_min_effect and not s.suspect]


__all__ = [
    "Step",
    "detect_steps",
    "gate_failures",
    "higher_is_better",
    "rerun_command",
    "series_steps",
]
