"""Sweep rows for a set of DVC experiments, failed and queued ones included.

``dvc exp show --json`` gives each experiment's params, its flat metrics files (complete
values only, by the pipeline's contract) and its executor's state; a failed queued
experiment's log gives its error line. The rows have the shape of
:mod:`torchscan_stages.pipeline.sweep`'s, so one page shows either kind of sweep. Full
reports stay in the DVC cache (``dvc exp apply NAME`` brings one back); the row names the
experiment's commit as provenance.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from ..report.sweep import SweepJob

_STATES = {"success": "completed", "failed": "failed"}


def _flatten(params: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Dotted params; a config group with a ``name`` is shown by that name."""
    flat: dict[str, str] = {}
    for key, value in params.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and "name" in value:
            flat[dotted] = str(value["name"])
        elif isinstance(value, dict):
            flat.update(_flatten(value, f"{dotted}."))
        else:
            flat[dotted] = json.dumps(value) if not isinstance(value, str) else value
    return flat


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _unit(key: str) -> str:
    if key.endswith("_bytes"):
        return "bytes"
    return "s" if key.endswith("_s") else ""


def _error_line(executor: dict[str, Any], rev_error: Any) -> str:
    """The failing stage's own line from the experiment's log, else DVC's message."""
    log = Path(str(((executor.get("local") or {}).get("log")) or ""))
    if log.is_file():
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
        for index, line in enumerate(lines):
            if line.startswith("ERROR:"):
                before = lines[index - 1] if index else ""
                return before if before and not before.startswith(">") else line
    if isinstance(rev_error, dict) and rev_error.get("msg"):
        return str(rev_error["msg"])
    return f"experiment state: {executor.get('state')}"


def _row(experiment: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    revision = (experiment.get("revs") or [{}])[0]
    data = revision.get("data") or {}
    executor = experiment.get("executor") or {}
    state = str(executor.get("state") or ("success" if data else "unknown"))
    row: dict[str, Any] = {
        "job": str(experiment.get("name") or revision.get("name") or revision.get("rev")),
        "status": _STATES.get(state, state),
        "provenance": {
            "git_commit": revision.get("rev"),
            "timestamp": _text(data.get("timestamp")),
        },
        "metrics": {},
        "reports": [],
    }
    if row["status"] != "completed":
        row["error"] = _error_line(executor, revision.get("error"))
    for path, entry in (data.get("metrics") or {}).items():
        stem = Path(path).stem
        for key, value in ((entry or {}).get("data") or {}).items():
            if type(value) not in (int, float) or value != value:  # not the pipeline's metrics
                row["metrics"][f"{stem}.{key}"] = {"status": "unavailable", "unit": _unit(key),
                                                   "scope": f"{path}: not a number"}  # fmt: skip
                continue
            row[f"{stem}_{key}"] = value
            row["metrics"][f"{stem}.{key}"] = {
                "status": "complete", "value": value, "known_value": value,
                "unit": _unit(key), "scope": f"{path} (complete values only)",
            }  # fmt: skip
    params = ((data.get("params") or {}).get("params.yaml") or {}).get("data") or {}
    return row, _flatten(params)


def experiment_rows(table: list[dict[str, Any]]) -> list[SweepJob]:
    """Rows from ``dvc exp show --json``; axes are the params that differ between them."""
    pairs = [_row(experiment) for commit in table for experiment in commit.get("experiments") or []]
    known = [params for _, params in pairs if params]
    keys = sorted({k for params in known for k in params})
    varying = [k for k in keys if len({params.get(k) for params in known}) > 1]
    for row, params in pairs:
        if params:
            row["axes"] = {k: params.get(k, "") for k in varying}
    return [SweepJob.model_validate(row) for row, _ in pairs]


def dvc_experiment_rows(repo: Path) -> list[SweepJob]:
    """Run ``dvc exp show --json`` in ``repo`` and turn its experiments into rows."""
    done = subprocess.run(
        ["dvc", "exp", "show", "--json"], cwd=repo, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"dvc exp show failed in {repo}: {done.stderr.strip()[-500:]}")
    return experiment_rows(json.loads(done.stdout))
