"""History across commits: committed flat metrics read from git, steps, bisect.

Sits beside the pipeline on top of the layers (it may import pipeline, render, report):
``read_history`` reads every commit's metrics straight from git objects (and the full
reports from the DVC cache where present, the evidence sidecars beside them), and
``detect_steps`` fits weighted steps per comparable segment: confident on clean points,
suspect where only weak ones show a step. ``history_document`` builds the ``history``
report kind and ``write_history_json`` saves it (``render_report`` draws its page), and
``bisect_step`` narrows a step to one commit.

Never: checks out a commit to read it; joins segments across an environment change.
"""

from __future__ import annotations

from .detect import Step, detect_steps, gate_failures
from .document import history_document, write_history_json
from .gitread import Commit, GitError
from .series import History, Point, Segment, Series, read_history
from .steps import FitStep, fit_steps

__all__ = [
    "Commit",
    "FitStep",
    "GitError",
    "History",
    "Point",
    "Segment",
    "Series",
    "Step",
    "detect_steps",
    "fit_steps",
    "gate_failures",
    "history_document",
    "read_history",
    "write_history_json",
]
