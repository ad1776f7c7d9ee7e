"""Saved latency reports built from synthetic block times (no clock is read)."""

from __future__ import annotations

from torchscan_stages.measure.block_summary import SampledBlocks, latency_section
from torchscan_stages.measure.latency_options import LatencyOptions
from torchscan_stages.provenance import build_provenance
from torchscan_stages.report import BenchmarkReport, ExecutionRecord

BASE = [0.0100 + 0.00001 * (i % 5) for i in range(20)]  # 10.00-10.04 ms


def latency_report(blocks: list[float], name: str) -> BenchmarkReport:
    """A latency report with given raw block times (seconds per call)."""
    sampled = SampledBlocks(blocks, blocks[0], calls_per_block=10, warmup_calls=5, total_time_s=1.0)
    # min_blocks 1: a short synthetic sample keeps its relative IQR (no too_few_blocks)
    section, _ = latency_section(
        sampled,
        LatencyOptions(min_blocks=1, noise_threshold=0.05),
        work_units=1,
        unit="calls",
        synchronized=False,
        settings={},
    )
    return BenchmarkReport(
        provenance=build_provenance(),
        name=name,
        execution=ExecutionRecord(
            device="cpu", num_threads=1, num_interop_threads=1, grad_enabled=False
        ),
        latency=section,
    )
