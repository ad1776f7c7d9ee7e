"""Predict a 70B Llama-shaped training step on fake tensors: wall time and peak RSS.

Run: ``.venv/bin/python benchmarks/bench_predict.py``. The prediction (bf16 weights and
gradients, fp32 master weights and AdamW moments, batch 1, sequence 2048, CUDA allocator
model; ``tests/predict/predict_models.mixed_precision_step``) runs in a fresh child
process so its peak RSS is its own, measured by ``measure_peak_rss`` (imports included);
the child writes its own wall time of the prediction and the predicted peak. The issue's
budget on the 2-core development machine: under 30 s and under 1 GiB peak RSS.

``--depth 25 100 400 1600`` also predicts an AdamW training step of that many Linear+ReLU
blocks (``models.scaling_model``, width 16, batch 8) and prints, side by side on the same
steps in this one run: our CPU time, torch's private ``MemTracker`` on the same fake step,
the log-log slope of our CPU time in depth (first to last depth; the first call of the run
is a warm-up, not timed), and predicted/measured (``measure_peak_memory`` on the real step).
``--memtracker-up-to N`` (default 400) runs MemTracker only up to N blocks: its own cost
grows faster than linearly in depth (about 14 CPU-s at 100 blocks on the loaded 2-core
machine), so the deepest steps would take it many minutes.

``--sharded`` (code in ``bench_predict_sharded.py``) puts the FSDP2 steady state and
``max_batch_size(world_size=2)`` beside torch's ``FSDPMemTracker`` on the same fake world.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = """
import sys, time
sys.path.insert(0, {tests!r})
import torch
from predict_models import LLAMA_70B as S, mixed_precision_step
from torchscan_stages import predict_peak_memory

torch.set_num_threads(1)


def step():
    mixed_precision_step(S, batch=1, tokens=2048)


start = time.perf_counter()
report = predict_peak_memory(step, device="cuda")
elapsed = time.perf_counter() - start
out = open(sys.argv[1], "w")
gib = report.peak.value / 2**30
print(f"prediction wall time {{elapsed:.1f}} s; predicted peak {{gib:,.1f}} GiB"
      f" ({{report.peak.status}}, at {{report.phase_at_peak}})", file=out)
out.close()
"""


def _depth_step(blocks: int) -> Any:
    from benchmarks.models import scaling_model

    def step() -> None:
        model = scaling_model(blocks)
        optimizer = torch.optim.AdamW(model.parameters())
        model(torch.randn(8, 16)).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def _memtracker_seconds(step: Any) -> float:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    start = time.process_time()
    with FakeTensorMode():
        tracker = MemTracker()
        with tracker:
            step()
    return time.process_time() - start


def depth(blocks: list[int], memtracker_up_to: int = 400) -> None:
    """Our CPU time against MemTracker's, the slope in depth, and predicted/measured."""
    from torchscan_stages import measure_peak_memory, predict_peak_memory

    torch.set_num_threads(1)
    predict_peak_memory(_depth_step(2), device="cpu")  # warm-up: imports, first dispatch
    ours: list[float] = []
    print("| blocks | ours CPU s | MemTracker CPU s | ours / MemTracker | predicted / measured |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for n in blocks:
        step = _depth_step(n)
        start = time.process_time()
        report = predict_peak_memory(step, device="cpu")
        ours.append(time.process_time() - start)
        theirs = _memtracker_seconds(step) if n <= memtracker_up_to else None
        measured = measure_peak_memory(step).memory.results[0].value  # type: ignore[union-attr]
        ratio = float(report.peak.value) / float(measured)  # type: ignore[arg-type]
        them = "not run" if theirs is None else f"{theirs:.2f}"
        versus = "-" if theirs is None else f"{ours[-1] / theirs:.2f}"
        print(f"| {n:,} | {ours[-1]:.2f} | {them} | {versus} | {ratio:.4f} |", flush=True)
    for i in range(1, len(blocks)):
        n0, n1, t0, t1 = blocks[i - 1], blocks[i], ours[i - 1], ours[i]
        print(f"log-log slope {n0} -> {n1} blocks: {math.log(t1 / t0) / math.log(n1 / n0):.3f}")
    if len(blocks) > 1:
        slope = math.log(ours[-1] / ours[0]) / math.log(blocks[-1] / blocks[0])
        print(f"log-log slope of our CPU time, {blocks[0]} -> {blocks[-1]} blocks: {slope:.3f}")
    print(f"host load average: {os.getloadavg()[0]:.1f} (CPU time, measured under that load)")


def main() -> int:
    import tempfile

    if "--sharded" in sys.argv:
        from benchmarks.bench_predict_sharded import sharded

        sharded()
        return 0
    if "--depth" in sys.argv:
        up_to = 400
        if "--memtracker-up-to" in sys.argv:
            at = sys.argv.index("--memtracker-up-to")
            up_to = int(sys.argv[at + 1])
            del sys.argv[at : at + 2]
        depth([int(a) for a in sys.argv[sys.argv.index("--depth") + 1 :]], up_to)
        return 0

    from torchscan_stages import measure_peak_rss
    from torchscan_stages.render.format import iec_bytes

    code = CHILD.format(tests=str(ROOT / "tests" / "predict"))
    with tempfile.TemporaryDirectory() as folder:
        said = Path(folder) / "child.txt"
        command = [sys.executable, "-c", code, str(said)]
        report = measure_peak_rss(command, timeout=600, name="predict 70B")
        if said.exists():
            print("child: " + said.read_text(encoding="utf-8").strip())
    section = report.rss
    assert section is not None
    print(f"child exit code {section.exit_code}, wall time {section.wall_time_s:.1f} s")
    peak = section.peak
    shown = iec_bytes(peak.known_value) if peak.known_value is not None else "unavailable"
    print(f"child peak RSS {shown} ({peak.status})")
    for diagnostic in report.diagnostics:
        print(f"  {diagnostic.code}: {diagnostic.message}")
    return 0 if section.exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
