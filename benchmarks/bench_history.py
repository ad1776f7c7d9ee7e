"""History over 200 commits: read from git objects, fit steps, render the page.

Budget: ``python -m torchscan_stages history`` over 200 commits of committed metrics in
under 10 s (the issue's bar), measured as the whole command (interpreter start included).
The repository is generated with ``git fast-import``: 200 commits, each with three
metrics files (latency, memory, crawl: 11 numbers), their evidence sidecars, dvc.lock and
params.yaml; the metrics change every 10th commit, so most blobs are shared, as in a real
history (one latency point in ten carries a validity warning).

Run: ``.venv/bin/python benchmarks/bench_history.py [--commits N]``. Prints one JSON object
(wall seconds, the host's load average before and after); exit 1 over budget.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "history"))
from synthetic import fast_repo, lock, sidecar  # noqa: E402  (tests/history/synthetic.py)

BUDGET_S = 10.0


def _evidence(stage: str, keys: list[str], warned: bool) -> str:
    entry = {"status": "complete", "warnings": ["loaded_host"] if warned else []}
    return sidecar(stage, dict.fromkeys(keys, entry))


def _commit(i: int) -> dict[str, str]:
    level = 1.0 + (i // 10) * 0.01  # a new value every 10th commit
    names = ("parameters", "parameter_bytes", "module_flops", "macs", "dmas", "operator_flops")
    crawl = {name: int(1000 * level * (k + 1)) for k, name in enumerate(names)}
    latency = ["warmed_median_s", "throughput_per_s", "warmed_iqr_s"]
    return {
        "metrics/latency.evidence.json": _evidence("latency", latency, (i // 10) % 10 == 3),
        "metrics/memory.evidence.json": _evidence(
            "memory", ["peak_cpu_tracked_tensors_bytes"], False
        ),
        "metrics/crawl.evidence.json": _evidence("crawl", list(names), False),
        "src.py": f"x = {i // 10}\n",
        "dvc.lock": lock(f"x = {i // 10}\n"),
        "metrics/latency.json": json.dumps(
            {
                "warmed_median_s": 0.01 * level,
                "throughput_per_s": 800 / level,
                "warmed_iqr_s": 0.0002,
            }
        ),
        "metrics/memory.json": json.dumps({"peak_cpu_tracked_tensors_bytes": int(4096 * level)}),
        "metrics/crawl.json": json.dumps(crawl),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=200)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        repo = Path(scratch) / "repo"
        fast_repo(repo, [_commit(i) for i in range(args.commits)])
        load_before = os.getloadavg()
        started = time.perf_counter()
        outputs = ["--json", str(Path(scratch) / "h.json"), "--html", str(Path(scratch) / "h.html")]
        command = [sys.executable, "-m", "torchscan_stages", "history", "--repo", str(repo)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [*command, "--limit", str(args.commits), *outputs],
            capture_output=True, text=True, check=False, env=env,
        )  # fmt: skip
        wall = time.perf_counter() - started
    result = {
        "commits": args.commits,
        "wall_s": round(wall, 3),
        "budget_s": BUDGET_S,
        "exit_status": done.returncode,
        "summary": done.stdout.splitlines()[:1],
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "logical_cpus": os.cpu_count(),
    }
    print(json.dumps(result, indent=1))
    return 0 if done.returncode == 0 and wall < BUDGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
