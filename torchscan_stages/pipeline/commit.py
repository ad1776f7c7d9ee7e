"""What to commit after a run: one recipe, printed by ``make main``, the render stage and
written in the README (a test keeps the three equal).

``git add`` names exactly the files the pipeline owns: ``dvc.lock`` (every output's hash),
``params.yaml`` (conf/'s composition), ``metrics/`` and ``plots/`` (``cache: false``: git
carries them for ``dvc metrics diff`` / ``dvc plots diff`` / ``dvc exp show``; ``metrics/``
holds each stage's ``<stage>.evidence.json`` sidecar too, the status and validity warnings
behind every metrics key, so a past point is weighed without the DVC cache) and
``reports/.gitignore`` (DVC's list of cached reports). Never ``conf/``: that is your source;
commit the files you changed there as you commit code, not whatever half-written file sits
beside them. The reports themselves go to the DVC remote (``.venv/bin/dvc push``: spelled
with the venv's path, so the line runs as printed in a new shell after ``make main``, where
nothing has put the venv on ``PATH``).

    python -m torchscan_stages.pipeline.commit     # prints the recipe
"""

from __future__ import annotations

import sys

PIPELINE_FILES = ("dvc.lock", "params.yaml", "metrics", "plots", "reports/.gitignore")
MESSAGE = "Reproduce the pipeline"
# the venv `make main` / `make setup` create; runs from the repository root in any shell
DVC = ".venv/bin/dvc"


def recipe_lines() -> list[str]:
    """The commands, one a line, as the README's block shows them."""
    return [f"git add {' '.join(PIPELINE_FILES)}", f'git commit -m "{MESSAGE}"', f"{DVC} push"]


def recipe_text() -> str:
    """Two lines for a console: the one-line recipe and what it leaves to the user."""
    return (
        f"to keep it: {' && '.join(recipe_lines())}\n"
        "  (the files the pipeline owns; commit what you changed in conf/ as code)"
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args:
        print(f"usage: python -m torchscan_stages.pipeline.commit  (got {args!r})", file=sys.stderr)
        return 2
    print(recipe_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
