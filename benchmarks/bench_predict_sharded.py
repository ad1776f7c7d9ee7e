"""FSDP2 steady state and ``max_batch_size(world_size=2)`` beside torch's ``FSDPMemTracker``.

Run: ``.venv/bin/python benchmarks/bench_predict.py --sharded``. One rank of a world of 2,
the tests' Llama-style decoder at ``SHAPE`` (fp32, AdamW, ``reshard_after_forward=True``),
batch ``BATCH`` of ``TOKENS`` tokens. Printed side by side from this one run:

* the first step's and the steady state's per-rank peak: ``predict_sharded_peak_memory``
  (one call of the step; the steady state derived from it) against ``FSDPMemTracker`` on
  the same fake world over one step and over the second of two steps of one model (the
  steady state), with each one's CPU time;
* ``max_batch_size(world_size=2)`` at ``CAPACITY``: the answer, its probes and CPU time, and
  ``FSDPMemTracker``'s two-step peak at the answer and the next batch against the capacity.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "predict"))

WORLD, BATCH, TOKENS = 2, 4, 256
CAPACITY = 768 * 2**20


def _shape() -> Any:
    from predict_models import DecoderShape

    return DecoderShape(vocab=8192, dim=512, layers=4, heads=8, kv_heads=4, hidden=1408)


def _tracker_peak(steps: int, batch: int) -> tuple[int, float]:
    """FSDPMemTracker's peak over the last of ``steps`` steps of one model (it tracks one
    iteration; the tensors alive before it, state included, are in its total), and its CPU
    seconds."""
    from sharded_models import build_sharded, run_step
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

    from torchscan_stages.predict.sharded import fake_world

    start = time.process_time()
    with fake_world(WORLD) as mesh, FakeTensorMode():
        model = build_sharded(mesh, _shape())
        optimizer = torch.optim.AdamW(model.parameters())
        for _ in range(steps - 1):
            run_step(model, optimizer, batch, TOKENS, _shape().vocab)
        tracker = FSDPMemTracker(model, optimizer)
        with tracker:
            run_step(model, optimizer, batch, TOKENS, _shape().vocab)
        peak = int(tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"])
    return peak, time.process_time() - start


def sharded() -> None:
    from sharded_models import fsdp_step

    from torchscan_stages import max_batch_size, predict_sharded_peak_memory

    torch.set_num_threads(1)
    predict_sharded_peak_memory(fsdp_step(), world_size=WORLD, device="cpu")  # warm-up
    start = time.process_time()
    report = predict_sharded_peak_memory(
        fsdp_step(_shape(), batch=BATCH, tokens=TOKENS), world_size=WORLD, device="cpu"
    )
    ours = time.process_time() - start
    first, first_s = _tracker_peak(1, BATCH)
    steady, steady_s = _tracker_peak(2, BATCH)
    assert report.steady_state_peak is not None
    print(f"decoder {_shape()}, world {WORLD}, rank 0, batch {BATCH} x {TOKENS} tokens")
    print("| figure | ours | FSDPMemTracker | ours / FSDPMemTracker | CPU s ours / theirs |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, value, theirs, seconds in (
        ("first step", report.peak.value, first, first_s),
        ("steady state", report.steady_state_peak.value, steady, steady_s),
    ):
        assert value is not None
        print(
            f"| {label} | {value:,} | {theirs:,} | {value / theirs:.4f} | "
            f"{ours:.2f} / {seconds:.2f} |"
        )
    start = time.process_time()
    search = max_batch_size(
        lambda b: fsdp_step(_shape(), batch=b, tokens=TOKENS),
        capacity_bytes=CAPACITY,
        device="cpu",
        world_size=WORLD,
    )
    seconds = time.process_time() - start
    probes = [(p.batch, p.peak.value) for p in search.probes]
    print(f"max_batch_size(world_size={WORLD}) at {CAPACITY:,} B: batch {search.batch}, ")
    print(f"  {len(probes)} probes (batch, steady-state peak) {probes}, {seconds:.1f} CPU-s")
    if search.batch is not None:
        for batch in (search.batch, search.batch + 1):
            peak, _ = _tracker_peak(2, batch)
            verdict = "fits" if peak <= CAPACITY else "does not fit"
            print(f"  FSDPMemTracker, two steps at batch {batch}: {peak:,} B, {verdict}")
        nxt = predict_sharded_peak_memory(
            fsdp_step(_shape(), batch=search.batch + 1, tokens=TOKENS),
            world_size=WORLD,
            device="cpu",
        )
        assert nxt.peak.value is not None
        judged = "fits" if nxt.peak.value <= CAPACITY else "does not fit"
        print(
            f"  the first step's peak at batch {search.batch + 1}: {nxt.peak.value:,} B, {judged}"
        )
    print(f"host load average: {os.getloadavg()[0]:.1f}")
