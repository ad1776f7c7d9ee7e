"""Every real gloo case (FSDP2, DDP, tensor parallel) at one world size, for the gloo tests.

Usage: ``python gloo_rank.py WORLD PORT OUT_DIR FAMILY[,FAMILY...]`` (as
``gloo_launch.launch_world`` starts it; families: fsdp, ddp, tp). Imports torch and
everything the cases use once, then forks one process per rank; each joins a real process
group on 127.0.0.1:PORT, runs each case of the families in ``gloo_cases`` once under
``measure_peak_memory``, in the same order on every rank, and writes OUT_DIR/rankR.json with
each case's measured ``cpu_tracked_tensors`` peak: one launch serves all the cases. The
``steady`` family adds two-step runs (the steady state's reference) and an FSDP2 model built
before the calls, measured against torch.profiler's allocator events.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

# imported before the fork, so no rank imports them again: fully_shard and DTensor's
# parallel styles pull in most of torch.distributed, and their first call torch._dynamo
import torch._dynamo
import torch.distributed.fsdp
import torch.distributed.tensor.parallel  # noqa: F401
from gloo_cases import (
    BATCH,
    CAPACITY_BATCHES,
    DDP_CAPACITY_BATCHES,
    DDP_CASES,
    FSDP_CASES,
    GLOO_SHAPE,
    STEADY_CASES,
    TOKENS,
    TP_CASES,
    ddp_case,
    fsdp_case,
    steady_case,
    tp_case,
)
from gloo_launch import fork_world, measure_cases, write_record
from torch.distributed.device_mesh import init_device_mesh
from torch.nn.parallel import DistributedDataParallel

import torchscan_stages.measure.memory  # noqa: F401  (measure_cases imports it lazily)


def run_rank(families: set[str], rank: int, world: int, out: Path) -> None:
    """This rank's cases of ``families``, measured in order, written to ``out``."""
    mesh = init_device_mesh("cpu", (world,))
    cases: dict[str, Callable[[], None]] = {}
    for name in FSDP_CASES if "fsdp" in families else ():
        cases[name] = partial(fsdp_case(name), mesh)
    for name in DDP_CASES if "ddp" in families else ():
        cases[name] = partial(ddp_case(name), DistributedDataParallel)
    for name in TP_CASES if "tp" in families else ():
        cases[name] = partial(tp_case(name), mesh)
    for name in STEADY_CASES if "steady" in families else ():
        ddp = STEADY_CASES[name][0] == "ddp"
        cases[name] = partial(steady_case(name, 2), DistributedDataParallel if ddp else mesh)
    for batch in CAPACITY_BATCHES if "steady" in families else ():
        cases[f"capacity_{batch}"] = partial(fsdp_case("fsdp", 2, batch), mesh)
    for batch in DDP_CAPACITY_BATCHES if "steady" in families else ():
        step = ddp_case("ddp", 2, batch=batch)
        cases[f"ddp_capacity_{batch}"] = partial(step, DistributedDataParallel)
    # the cases the tests compare byte for byte with a prediction, measured twice (the lower)
    twice = frozenset(FSDP_CASES) | frozenset(DDP_CASES) | frozenset(STEADY_CASES)
    results = measure_cases(cases, twice=twice)
    if "steady" in families:
        results["fsdp_built_before"] = built_before(mesh)
    write_record(out, rank, results)


def built_before(mesh: Any) -> dict[str, Any]:
    """An FSDP2 model and AdamW built before the calls: step 1 and step 2 measured with
    ``measure_peak_memory``, steps 3 to 5 (the same steady state) under torch.profiler, whose
    allocator events give the allocator's peak over each step."""
    import torch
    from sharded_models import build_sharded, run_step

    from torchscan_stages.measure.memory import measure_peak_memory

    def tracked(report: Any) -> Any:
        [cpu] = [r for r in report.memory.results if r.scope == "cpu_tracked_tensors"]
        return cpu

    model = build_sharded(mesh, GLOO_SHAPE)
    optimizer = torch.optim.AdamW(model.parameters())

    def step() -> None:
        run_step(model, optimizer, BATCH, TOKENS, GLOO_SHAPE.vocab)

    first = measure_peak_memory(step, device="cpu")
    # steady steps 2 to 4, measured: the least of three, as for the profiler below (gloo at
    # times makes a collective's flat copy on this thread, where the tracker sees it)
    steady = [tracked(measure_peak_memory(step, device="cpu")) for _ in range(3)]
    low = min(steady, key=lambda cpu: cpu.known_value or 0)
    profiled = [profiled_peaks(step) for _ in range(3)]
    return {
        "first_baseline": first.memory.baseline_bytes["cpu_tracked_tensors_preexisting"],
        "status": low.status,
        "peak": low.known_value,
        "peaks": [cpu.known_value for cpu in steady],
        "profiler_peaks": [whole for whole, _ in profiled],
        "profiler_peaks_outside_collectives": [outside for _, outside in profiled],
    }


def profiled_peaks(step: Any) -> tuple[int, int]:
    """torch.profiler's allocator peak over one ``step()``, whole and without the allocations
    gloo makes for its collectives (its flat scratch: on its worker threads, or on this
    thread inside a collective operator or its ``wait()``, named here by a record)."""
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function

    wait = dist.Work.wait

    def named_wait(work: Any, *args: Any, **kwargs: Any) -> Any:
        with record_function("c10d::wait"):
            return wait(work, *args, **kwargs)

    dist.Work.wait = named_wait
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            step()
    finally:
        dist.Work.wait = wait
    events = prof.profiler.kineto_results.events()
    collectives = [e for e in events if e.name().startswith("c10d::")]
    spans = [(e.start_ns(), e.start_ns() + e.duration_ns()) for e in collectives]
    caller = collectives[0].start_thread_id()
    running = top = outside = top_outside = 0
    for event in sorted((e for e in events if e.name() == "[memory]"), key=lambda e: e.start_ns()):
        running += event.nbytes()
        top = max(top, running)
        if event.start_thread_id() == caller and not any(
            start <= event.start_ns() <= end for start, end in spans
        ):
            outside += event.nbytes()
            top_outside = max(top_outside, outside)
    return top, top_outside


if __name__ == "__main__":
    families = set(sys.argv[4].split(","))
    assert families <= {"fsdp", "ddp", "tp", "steady"}, f"gloo_rank.py: unknown {families}"
    sys.exit(fork_world(sys.argv, partial(run_rank, families)))
