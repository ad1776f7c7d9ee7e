"""`make bench`: build the benchmark environment, run every comparison, write the results.

Why a separate environment: the peers (torchscan 0.2, fvcore, ptflops, thop, torchinfo) must
never become dependencies of the package, so they live only in ``benchmarks/.venv``. This
script is started by the project's interpreter, creates/updates that venv (torch pinned
through ``constraints.txt``; peers installed with ``--no-deps`` and their light dependencies
named explicitly), then re-executes itself inside it.

Outputs: ``benchmarks/results/results.json`` and the tables in ``docs/benchmarks.md``.
Options: ``--setup-only`` (build the venv and stop), ``--quick`` (fewer repeats, for a smoke
run; the committed tables always come from a default run), ``--only accuracy|latency``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = HERE / ".venv"
VENV_PY = VENV / "bin" / "python"
STAMP = VENV / ".bench-stamp"
RESULTS = HERE / "results" / "results.json"
DOC = ROOT / "docs" / "benchmarks.md"

TORCH_PIN = "torch==2.13.0"
# Peers, exact versions: the tables name them, and a new release must be a deliberate change.
PEERS = [
    "torchscan==0.2.0",
    "fvcore==0.1.5.post20221221",
    "ptflops==0.7.5",
    "thop==0.1.1.post2209072238",
    "torchinfo==1.8.0",
    # Not a cost tool: the timing peer of bench_noise.py's pressure table (pure Python).
    "pyperf==2.11.0",
]
# Light run-time dependencies of the peers (fvcore, iopath), installed explicitly because the
# peers themselves go in with --no-deps (so pip never touches the pinned torch).
PEER_DEPS = [
    "iopath==0.1.10",
    "yacs",
    "tabulate",
    "termcolor",
    "pyyaml",
    "portalocker",
    "tqdm",
    "Pillow",
    # The test runner torchinfo's own tests import (peer_suites.py runs them).
    "pytest==9.2.0",
]


def _in_bench_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


def _stamp_text() -> str:
    """Fingerprint of what the venv should contain; a change reinstalls."""
    pins = "\n".join([TORCH_PIN, *PEERS, *PEER_DEPS])
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    constraints = (ROOT / "constraints.txt").read_bytes()
    digest = hashlib.sha256(pins.encode() + pyproject + constraints).hexdigest()
    return f"{digest}\n{sys.version}\n"


def _pip(*args: str) -> None:
    cmd = [str(VENV_PY), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)


def ensure_venv() -> None:
    """Create ``benchmarks/.venv`` and install torch, the project and the peers (idempotent)."""
    if STAMP.exists() and STAMP.read_text() == _stamp_text() and VENV_PY.exists():
        return
    started = time.perf_counter()
    if not VENV_PY.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    _pip(TORCH_PIN)
    _pip("-e", str(ROOT))
    _pip(*PEER_DEPS)
    _pip("--no-deps", *PEERS)
    STAMP.write_text(_stamp_text())
    print(f"benchmark venv ready in {time.perf_counter() - started:.0f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup-only", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=["accuracy", "latency"], default=None)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--doc", type=Path, default=DOC)
    args = parser.parse_args(argv)
    if not _in_bench_venv():
        ensure_venv()
        if args.setup_only:
            return 0
        forwarded = sys.argv[1:] if argv is None else argv
        env = dict(os.environ, PYTHONHASHSEED="0")
        return subprocess.run([str(VENV_PY), str(Path(__file__)), *forwarded], env=env).returncode
    if args.setup_only:
        return 0
    sys.path.insert(0, str(HERE))
    from suite import run_suite

    run_suite(quick=args.quick, only=args.only, results_path=args.results, doc_path=args.doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
