"""Stage ``memory``: peak PyTorch memory of one workload call, per scope.

Measures: the peak of live tensor storage (CPU) or allocator peaks (CUDA), each scope on its
own, never summed. Writes: reports/memory.json (BenchmarkReport) and metrics/memory.json.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: its relative imports cannot work
    sys.exit(
        "torchscan_stages/stages/memory.py is part of a package; run it as a module: "
        "python -m torchscan_stages.stages.memory"
    )

from typing import Any

from ..pipeline.feedback import figure
from ..pipeline.runner import (
    COUNT_KEYS,
    StageContext,
    budget_outcome,
    complete_value,
    record_execution,
    stage_main,
)

WRITES = ("reports/memory.json", "metrics/memory.json", "metrics/memory.evidence.json")
KEYS = (*COUNT_KEYS, "memory", "budgets")


def run(ctx: StageContext) -> None:
    from ..measure.memory import measure_peak_memory
    from ..pipeline.workload import build_workload

    workload = build_workload(ctx.config)
    # at torch's own thread count: tracked tensors and allocator peaks do not depend on it
    report = measure_peak_memory(workload, device=workload.device, name=workload.name)
    record_execution(report, workload.precision, ctx.config)
    from ..pipeline.evidence import evidence_of, warning_codes

    metrics: dict[str, Any] = {}
    evidence: dict[str, Any] = {}
    results = report.memory.results if report.memory is not None else []
    for result in results:
        metrics[f"peak_{result.scope}_bytes"] = complete_value(result)
        codes = warning_codes(report.diagnostics, (f"memory.{result.scope}", result.scope))
        evidence[f"peak_{result.scope}_bytes"] = evidence_of(result, codes)
        evidence[f"peak_{result.scope}_bytes_within_budget"] = evidence[
            f"peak_{result.scope}_bytes"
        ]
    # The budget applies to the device's own scope: allocator peak on an accelerator,
    # tracked tensors on the CPU. Scopes are never summed.
    scope = "cpu_tracked_tensors" if workload.device.type == "cpu" else "accelerator_allocated"
    budgeted = next((r for r in results if r.scope == scope), None)
    report.diagnostics.extend(
        budget_outcome(
            metrics, f"peak_{scope}_bytes", budgeted, ctx.config.budgets.peak_memory_bytes
        )
    )
    ctx.headline = [figure(f"peak {r.scope}", r) for r in results]
    ctx.write_report(report)
    ctx.write_metrics(metrics, evidence=evidence)


if __name__ == "__main__":
    stage_main("memory", KEYS, run, about=__doc__ or "", writes=WRITES)
