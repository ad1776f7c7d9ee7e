"""Where a prediction and the real run part: their live-byte timelines, operator by operator.

Run: ``.venv/bin/python benchmarks/audit_timelines.py [--family encodec] [--threshold B]``.
``audit_fake_kernels.py`` compares what each operator allocates; a prediction can also be
off by *lifetimes* (a tensor the real run frees that the fake run keeps alive). This script
runs one training step of a Hugging Face family (built from config,
``integrations/hf_families.py``) twice: for real under ``measure.memory``'s tracker and on
fake tensors under the predictor's, recording the live bytes after every operator. The two
operator sequences are aligned (``difflib``, ignoring the operators only one side
dispatches), and every operator where the fake-minus-real gap moves by more than the
threshold is printed with its index and both live totals. Isolated Encodec's second cause:
the encoder's graph freed for real at the quantizer's ``torch.stack`` and kept alive in the
fake run by the module stack's gradient hooks (docs/prediction.md).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from torchscan_stages.integrations.hf_families import build_family  # noqa: E402
from torchscan_stages.measure.memory import TrackedTensorMemory  # noqa: E402
from torchscan_stages.predict.allocator import allocator_model  # noqa: E402
from torchscan_stages.predict.peak import _run  # noqa: E402
from torchscan_stages.predict.tracker import PeakTracker  # noqa: E402

ONE_SIDED = {"aten.detach.default", "prim.device.default", "aten.lift_fresh.default"}
Timeline = list[tuple[str, int]]


class _RealTimeline(TrackedTensorMemory):
    def __init__(self) -> None:
        super().__init__()
        self.timeline: Timeline = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = super().__torch_dispatch__(func, types, args, kwargs)
        self.timeline.append((str(func), self.current.get("cpu", 0)))
        return out


class _FakeTimeline(PeakTracker):
    timeline: Timeline

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = super().__torch_dispatch__(func, types, args, kwargs)
        self.__dict__.setdefault("timeline", []).append((str(func), self.current))
        return out


def _step(family: str) -> Callable[[], None]:
    def step() -> None:
        model, make_inputs = build_family(family)
        model.train()
        out = model(**make_inputs())
        first = next(v for v in out.values() if isinstance(v, torch.Tensor) and v.requires_grad)
        first.float().pow(2).mean().backward()

    return step


def timelines(step: Callable[[], None]) -> tuple[Timeline, Timeline]:
    """(real, fake) live bytes after each operator, one-sided operators left out."""
    real = _RealTimeline()
    with real:
        step()
    tracker, _snapshot, _notes = _run(step, allocator_model("cpu"), tracker_type=_FakeTimeline)
    fake = tracker.__dict__.get("timeline", [])
    keep = [[e for e in side if e[0] not in ONE_SIDED] for side in (real.timeline, fake)]
    return keep[0], keep[1]


def divergences(real: Timeline, fake: Timeline, threshold: int) -> list[str]:
    """Lines for every aligned operator where the fake-minus-real gap moves > threshold."""
    matcher = difflib.SequenceMatcher(None, [e[0] for e in real], [e[0] for e in fake], False)
    lines, gap = [], 0
    for a, b, size in matcher.get_matching_blocks():
        for k in range(size):
            (op, live), (_, fake_live) = real[a + k], fake[b + k]
            if abs(fake_live - live - gap) > threshold:
                lines.append(f"#{a + k} {op}: real {live:,} B, fake {fake_live:,} B "
                             f"(gap {gap:,} -> {fake_live - live:,})")  # fmt: skip
            gap = fake_live - live
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="encodec")
    parser.add_argument("--threshold", type=int, default=1000, help="bytes")
    options = parser.parse_args()
    real, fake = timelines(_step(options.family))
    print(f"real peak {max(v for _, v in real):,} B, fake peak {max(v for _, v in fake):,} B")
    print("\n".join(divergences(real, fake, options.threshold)) or "no divergence")


if __name__ == "__main__":
    main()
