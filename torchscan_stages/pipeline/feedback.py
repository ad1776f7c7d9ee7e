"""What a stage tells its user: one result line and its help text.

A stage run by ``dvc repro`` or by hand prints one line with its headline numbers, each
with its status, and the paths it wrote; under Hydra the same line also goes to the job's
log file. ``--help`` says what the stage measures, what it reads and what it writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..report import MetricResult


def figure(label: str, result: MetricResult | None, caveats: Sequence[str] = ()) -> str:
    """``warmed median 1.23 ms (complete)``; a lower bound shows ``≥``, nothing shows ``—``.

    ``caveats`` (render.caveats.latency_caveats) go inside the same parentheses:
    ``(complete with warnings: 1 block(s) < min 5; loaded host)``, never a bare "complete".
    """
    from ..render.caveats import status_text
    from ..render.format import metric_cell

    if result is None:
        return f"{label} — (not measured)"
    shown = status_text(result.status, list(caveats))
    return f"{label} {metric_cell(result, brief=True).text} ({shown})"


def result_line(stage: str, headline: Sequence[str], written: Sequence[Path]) -> str:
    """``latency: warmed median 1.23 ms (complete); ... -> reports/latency.json, ...``."""
    numbers = "; ".join(headline) if headline else "no headline numbers"
    paths = ", ".join(_shown(path) for path in written) or "nothing"
    return f"{stage}: {numbers} -> wrote {paths}"


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def help_text(stage: str, about: str, keys: Sequence[str], writes: Sequence[str]) -> str:
    """The stage's ``--help``: purpose, inputs (params keys) and outputs, then how to run it."""
    reads = ", ".join(keys) if keys else "(no config)"
    lines = [
        f"usage: python -m torchscan_stages.stages.{stage} [HYDRA OVERRIDES...] [-m]",
        "",
        about.strip(),
        "",
        f"reads:  params.yaml keys {reads} (under dvc repro), or conf/ composed by Hydra",
        f"writes: {', '.join(writes)}",
        "        under dvc repro: in the repository; by hand: in Hydra's run folder",
        "        (outputs/DATE/TIME/, or multirun/DATE/TIME/N/ with -m); the result line",
        "        names the paths",
        "",
        "examples:",
        f"  dvc repro {stage}",
        f"  python -m torchscan_stages.stages.{stage} threads=2 precision=bf16",
        f"  python -m torchscan_stages.stages.{stage} -m threads=1,2",
        "",
        "--hydra-help shows Hydra's own options; --cfg job prints the composed config.",
    ]
    return "\n".join(lines)
