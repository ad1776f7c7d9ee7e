"""measure_latency against torch.utils.benchmark on the same CNN workload, in one run.

Prints, for each method: median latency, IQR/median, blocks and the total wall time the
method spent (calibration and warm-up included), then the ratios and two checks:
medians within 5% of each other, and measure_latency reaching IQR/median < 2% in
no more total time than adaptive_autorange — judged against adaptive_autorange run to the
same 2% target (threshold=0.02) and, for reference, its default 10% threshold (which can stop
after four single-call blocks, i.e. five calls).

    .venv/bin/python benchmarks/bench_latency.py [--batch-size 8] [--rounds 2] [--threads 1]

The workload (zoo.small_resnet, evaluation mode, no_grad) is warmed before any method runs,
so no method pays the process's one-time initialisation. Timer runs with this process's
thread count (its default would be one thread). Methods alternate order between rounds.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.benchmark import Timer

from torchscan_stages import zoo
from torchscan_stages.measure.latency import measure_latency


def _workload(batch_size: int) -> Callable[[], torch.Tensor]:
    model = zoo.small_resnet().eval()
    (images,) = zoo.image_batch(batch_size=batch_size)

    def workload() -> torch.Tensor:
        with torch.no_grad():
            return model(images)

    return workload


def _ours(workload: Callable[[], Any]) -> dict[str, float]:
    started = time.perf_counter()
    report = measure_latency(workload)
    total = time.perf_counter() - started
    stats = report.latency.stats if report.latency is not None else None
    assert stats is not None
    return {
        "median": stats.median,
        "rel_iqr": stats.iqr / stats.median,
        "blocks": stats.blocks,
        "total_s": total,
    }


def _timer(workload: Callable[[], Any], how: str) -> dict[str, float]:
    timer = Timer(
        stmt="workload()", globals={"workload": workload}, num_threads=torch.get_num_threads()
    )
    started = time.perf_counter()
    if how == "blocked":
        measurement = timer.blocked_autorange()
    elif how == "adaptive":
        measurement = timer.adaptive_autorange()
    else:
        measurement = timer.adaptive_autorange(threshold=0.02)
    total = time.perf_counter() - started
    return {
        "median": measurement.median,
        "rel_iqr": measurement.iqr / measurement.median,
        "blocks": len(measurement.times),
        "total_s": total,
    }


METHODS: dict[str, Callable[[Callable[[], Any]], dict[str, float]]] = {
    "measure_latency": _ours,
    "Timer.blocked_autorange": lambda w: _timer(w, "blocked"),
    "Timer.adaptive_autorange": lambda w: _timer(w, "adaptive"),
    "Timer.adaptive_autorange(0.02)": lambda w: _timer(w, "adaptive-0.02"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads, set before measuring (default: unchanged)",
    )
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)  # the caller configures threads, then measures
    workload = _workload(args.batch_size)
    for _ in range(20):
        workload()  # one-time initialisation outside every method

    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"SmallResNet batch {args.batch_size}"
    )
    names = list(METHODS)
    for round_index in range(args.rounds):
        order = names if round_index % 2 == 0 else list(reversed(names))
        results = {name: METHODS[name](workload) for name in order}
        ours = results["measure_latency"]
        print(f"\nround {round_index + 1} (order: {', '.join(order)})")
        print(
            f"{'method':<32}{'median ms':>11}{'IQR/med':>9}{'blocks':>8}{'total s':>9}"
            f"{'median/ours':>13}{'time/ours':>11}"
        )
        for name in names:
            r = results[name]
            print(
                f"{name:<32}{r['median'] * 1e3:>11.3f}{r['rel_iqr']:>9.2%}{r['blocks']:>8.0f}"
                f"{r['total_s']:>9.2f}{r['median'] / ours['median']:>13.3f}"
                f"{r['total_s'] / ours['total_s']:>11.2f}"
            )
        spread = max(r["median"] for r in results.values()) / min(
            r["median"] for r in results.values()
        )
        same_target = results["Timer.adaptive_autorange(0.02)"]
        default = results["Timer.adaptive_autorange"]
        print(
            f"check medians within 5% of each other: max/min = {spread:.3f} -> "
            f"{'PASS' if spread <= 1.05 else 'FAIL'}"
        )
        for label, other in (
            ("adaptive_autorange(threshold=0.02)", same_target),
            ("adaptive_autorange (default threshold 0.1)", default),
        ):
            reached = ours["rel_iqr"] < 0.02 and ours["total_s"] <= other["total_s"]
            print(
                f"check measure_latency IQR/median {ours['rel_iqr']:.2%} < 2% in "
                f"{ours['total_s']:.2f} s <= {label} {other['total_s']:.2f} s -> "
                f"{'PASS' if reached else 'FAIL'}"
            )


if __name__ == "__main__":
    main()
