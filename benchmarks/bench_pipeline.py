"""Pipeline overhead: a no-op ``dvc repro`` vs ``dvc status``; a stage's fixed cost vs torch.

Budgets: no-op ``dvc repro`` at most 1.5 s more than ``dvc status`` on the same
repository; a stage's fixed overhead (interpreter start, imports, params.yaml, validation,
provenance context, building the workload) at most 1.3x ``python -c "import torch"``.

Run: ``.venv/bin/python benchmarks/bench_pipeline.py [--repeat N]``. It copies the working
tree to a temporary git repository, reproduces the pipeline once with tiny timing settings,
then times the commands (median of N runs each). Prints one JSON object; exit 1 over budget.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from worktree import copy_working_tree  # benchmarks/worktree.py

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

# What a stage does before its one library call (see torchscan_stages.pipeline.runner).
STAGE_PRELUDE = (
    "from torchscan_stages.pipeline.runner import run_stage\n"
    "from torchscan_stages.pipeline.workload import build_workload\n"
    "run_stage('bench', ('model', 'input', 'device', 'precision', 'threads', 'seed'),"
    " lambda ctx: build_workload(ctx.config), [])\n"
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DVC_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("GIT_AUTHOR_NAME", "bench")
    env.setdefault("GIT_AUTHOR_EMAIL", "bench@localhost")
    env.setdefault("GIT_COMMITTER_NAME", "bench")
    env.setdefault("GIT_COMMITTER_EMAIL", "bench@localhost")
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def _median(cmd: list[str], cwd: Path, env: dict[str, str], repeat: int) -> float:
    return statistics.median(_run(cmd, cwd, env) for _ in range(repeat))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    env = _env()
    with tempfile.TemporaryDirectory(prefix="bench_pipeline_") as tmp:
        repo = Path(tmp) / "repo"
        copy_working_tree(ROOT, repo)
        params = repo / "params.yaml"
        text = params.read_text(encoding="utf-8")
        params.write_text(
            text.replace("min_run_time: 1.0", "min_run_time: 0.05").replace(
                "warmup: 0.2", "warmup: 0.0"
            ),
            encoding="utf-8",
        )
        for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "b"]):
            subprocess.run(cmd, cwd=repo, env=env, check=True, capture_output=True)
        subprocess.run(["dvc", "repro"], cwd=repo, env=env, check=True, capture_output=True)
        repro = _median(["dvc", "repro"], repo, env, args.repeat)
        status = _median(["dvc", "status"], repo, env, args.repeat)
        torch_only = _median([sys.executable, "-c", "import torch"], repo, env, args.repeat)
        stage_env = {**env, "DVC_STAGE": "bench"}
        stage = _median([sys.executable, "-c", STAGE_PRELUDE], repo, stage_env, args.repeat)
    result = {
        "noop_repro_s": repro,
        "status_s": status,
        "repro_minus_status_s": repro - status,
        "repro_budget_s": 1.5,
        "import_torch_s": torch_only,
        "stage_fixed_overhead_s": stage,
        "stage_ratio": stage / torch_only,
        "stage_ratio_budget": 1.3,
    }
    result["within_budget"] = result["repro_minus_status_s"] <= 1.5 and result["stage_ratio"] <= 1.3
    print(json.dumps(result, indent=2))
    return 0 if result["within_budget"] else 1


if __name__ == "__main__":
    sys.exit(main())
