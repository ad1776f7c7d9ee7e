"""The rss stage on the demo model, run back to back: does a correct run ever get an error?

Each run is the real stage (``python -m torchscan_stages.stages.rss`` as DVC runs it, on a copy
of the repository's params.yaml in a scratch folder, its own timing-lock folder so no other
checkout's timing stage is waited on), one fresh child per run. Counted per run: the peak's
status, every error diagnostic and ``rss_phase_above_os`` (a phase claim the OS did not back;
intermittent before phase marks waited for the parent's own reading), and how far each phase
claim sat below the parent's witnessed reading. No duration is claimed.

    .venv/bin/python benchmarks/bench_rss_phases.py [--runs 100] [--doc docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from doc_sections import write_section

ROOT = Path(__file__).resolve().parents[1]


def one_run(folder: Path, env: dict[str, str]) -> dict[str, Any]:
    """One real rss stage run in ``folder``; its report's status and diagnostics."""
    done = subprocess.run(
        [sys.executable, "-m", "torchscan_stages.stages.rss"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return {"rc": done.returncode, "stderr": done.stderr[-500:]}
    report = json.loads((folder / "reports" / "rss.json").read_text(encoding="utf-8"))
    rss = report["rss"]
    return {
        "rc": 0,
        "peak": rss["peak"]["status"],
        "phases": {p["name"]: p["peak_rss"]["status"] for p in rss["phases"]},
        "codes": [d["code"] for d in report["diagnostics"] if d["severity"] == "error"],
        "above_os": sum(d["code"] == "rss_phase_above_os" for d in report["diagnostics"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--doc", type=Path, default=None)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DVC_", "TORCHSCAN_"))}
    env.update(DVC_STAGE="rss", PYTHONPATH=str(ROOT))
    runs: list[dict[str, Any]] = []
    started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench_rss_") as scratch:
        folder = Path(scratch)
        shutil.copy(ROOT / "params.yaml", folder / "params.yaml")
        env["TORCHSCAN_TIMING_LOCK"] = str(folder / "lock")
        for index in range(args.runs):
            runs.append(one_run(folder, env))
            print(index + 1, json.dumps(runs[-1]), flush=True)
    failed = sum(run["rc"] != 0 for run in runs)
    above = sum(int(run.get("above_os", 0)) for run in runs)
    errors = collections.Counter(code for run in runs for code in run.get("codes", []))
    peaks = collections.Counter(str(run.get("peak")) for run in runs if run["rc"] == 0)
    line = (
        f"{args.runs} back-to-back runs of the rss stage on the demo model: "
        f"**{above} `rss_phase_above_os`**, error diagnostics {dict(errors) or 'none'}, "
        f"peak status {dict(peaks)}, {failed} failed runs"
    )
    print(line)
    if args.doc is not None:
        text = (
            "## RSS phase claims, back to back\n\n"
            f"Run: {started} by `python benchmarks/bench_rss_phases.py --runs {args.runs}` "
            f"(load average {load:.1f} at the start, on a shared 2-core host): {line}.\n\n"
        )
        write_section(args.doc, "bench_rss_phases", text)


if __name__ == "__main__":
    main()
