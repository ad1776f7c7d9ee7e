"""Synthetic git histories for the reader, page and timing tests, built with git fast-import.

These test how history is READ (git objects, dvc.lock, segments, steps), so their metrics
files are written from formulas given by each test; what real stages write is tested in
test_history_e2e.py. ``lock`` writes a dvc.lock entry the way DVC 3 does (deps with md5,
params per stage, outs), so staleness and environment breaks can be planted exactly.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from torchscan_stages.provenance import build_provenance
from torchscan_stages.report.evidence import MetricEvidence, MetricsEvidence


def md5(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def lock(
    src: str,
    *,
    env: str = "env-a",
    threads: int = 1,
    revision: str = "1",
    outs: dict[str, str] | None = None,
) -> str:
    """dvc.lock text with stages latency and memory depending on src.py and reports/env.json."""
    section = {
        "model": {"name": "m", "revision": revision},
        "threads": threads,
        "device": {"type": "cpu", "index": None},
        "precision": {"name": "fp32", "apply": "cast"},
        "input": {"name": "i", "revision": "1"},
    }
    params = {"params.yaml": section}
    stages = {}
    for stage in ("latency", "memory"):
        stages[stage] = {
            "cmd": f"python -m torchscan_stages.stages.{stage}",
            "deps": [
                {"path": "reports/env.json", "hash": "md5", "md5": md5(env)},
                {"path": "src.py", "hash": "md5", "md5": md5(src)},
            ],
            "params": params,
            "outs": [
                {"path": f"metrics/{stage}.json", "hash": "md5", "md5": "0" * 32},
                {
                    "path": f"reports/{stage}.json",
                    "hash": "md5",
                    "md5": (outs or {}).get(stage, "f" * 32),
                },
            ],
        }
    return yaml.safe_dump({"schema": "2.0", "stages": stages}, sort_keys=False)


@functools.cache
def _provenance() -> Any:
    return build_provenance(include_runtime=False)


def sidecar(stage: str, entries: dict[str, dict[str, Any]]) -> str:
    """``metrics/STAGE.evidence.json`` text: each key's status, warnings, verdict, interval."""
    model = MetricsEvidence(
        provenance=_provenance(),
        stage=stage,
        metrics={k: MetricEvidence.model_validate(v) for k, v in entries.items()},
    )
    return model.model_dump_json(indent=1) + "\n"


def metrics(
    latency_s: float,
    peak: int,
    iqr: float | None = None,
    *,
    warnings: list[str] | None = None,
    evidence: bool = True,
) -> dict[str, str]:
    """Flat metrics of the latency and memory stages, with their evidence sidecars (clean,
    or the latency keys carrying ``warnings``; ``evidence=False``: results from before
    sidecars)."""
    values: dict[str, Any] = {"warmed_median_s": latency_s, "throughput_per_s": 8 / latency_s}
    if iqr is not None:
        values["warmed_iqr_s"] = iqr
    files = {
        "metrics/latency.json": json.dumps(values, indent=2) + "\n",
        "metrics/memory.json": json.dumps({"peak_cpu_tracked_tensors_bytes": peak}) + "\n",
    }
    if evidence:
        entry = {"status": "complete", "warnings": list(warnings or [])}
        files["metrics/latency.evidence.json"] = sidecar("latency", dict.fromkeys(values, entry))
        files["metrics/memory.evidence.json"] = sidecar(
            "memory", {"peak_cpu_tracked_tensors_bytes": {"status": "complete"}}
        )
    return files


def fast_repo(
    repo: Path, commits: list[dict[str, str]], subjects: dict[int, str] | None = None
) -> list[str]:
    """A repository with one commit per entry (paths -> text set in that commit), oldest
    first; ``subjects`` replaces the message of the commits it names (by position)."""
    repo.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    chunks: list[bytes] = []
    for number, files in enumerate(commits, start=1):
        message = (subjects or {}).get(number - 1, f"commit {number - 1}").encode()
        chunks.append(b"commit refs/heads/main\nmark :%d\n" % number)
        chunks.append(b"committer t <t@localhost> %d +0000\n" % (1_700_000_000 + 60 * number))
        chunks.append(b"data %d\n%s\n" % (len(message), message))
        if number > 1:
            chunks.append(b"from :%d\n" % (number - 1))
        for path, text in files.items():
            data = text.encode()
            name = path if "\n" not in path else '"' + path.replace("\n", "\\n") + '"'
            chunks.append(b"M 100644 inline %s\ndata %d\n%s\n" % (name.encode(), len(data), data))
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=b"".join(chunks), check=True)
    out = subprocess.run(["git", "rev-list", "--reverse", "main"], cwd=repo, check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    subprocess.run(["git", "checkout", "-q", "main"], cwd=repo, check=True)
    return out.split()
