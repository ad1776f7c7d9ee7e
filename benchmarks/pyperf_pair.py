"""One side of an A/B pair through pyperf, run the way its users run it: ``Runner.bench_func``
in pyperf's own worker processes, written to a JSON file for ``pyperf compare_to``.

    python benchmarks/pyperf_pair.py --fast --quiet -o base.json --ms 1.0

``--ms``: milliseconds the busy loop spins (the same loop as bench_noise.py's, so the true
ratio of two sides is known by construction). noise_pressure.py calls this once per side and
reads the verdict from ``python -m pyperf compare_to`` (its two-sample t-test).
"""

from __future__ import annotations

import argparse
import time

import pyperf


def busy(seconds: float) -> int:
    """Spin until ``seconds`` have passed (bench_noise.busy, as a plain function)."""
    end = time.perf_counter() + seconds
    spins = 0
    while time.perf_counter() < end:
        spins += 1
    return 1


def _forward_ms(cmd: list[str], args: argparse.Namespace) -> None:
    """pyperf re-executes this script for each worker; the workers need ``--ms`` too."""
    cmd.extend(("--ms", str(args.ms)))


def main() -> None:
    runner = pyperf.Runner(add_cmdline_args=_forward_ms)
    runner.argparser.add_argument("--ms", type=float, required=True)
    args = runner.parse_args()
    runner.bench_func("busy_loop", busy, args.ms * 1e-3)


if __name__ == "__main__":
    main()
