"""Stage ``serve``: the configured workload served under MLPerf LoadGen, per request.

Measures: per-request latency percentiles (LoadGen's own, arrival to completion), queueing
delay and service time, offered and achieved rates and LoadGen's validity verdict, in the
scenario of ``serve`` (conf/serve/); with ``serve.max_new_tokens`` (``serve=generate``) each
request is one prompt row streamed token by token, adding TTFT, TPOT and tokens/s, and one
stream counted once gives its prefill and per-token decode FLOPs. Writes: reports/serve.json
(ServedReport) and metrics/serve.json (complete values only) with its evidence sidecar.
"""

from __future__ import annotations

import sys
from typing import Any

if not __package__:  # run as a file: its relative imports cannot work
    sys.exit(
        "torchscan_stages/stages/serve.py is part of a package; run it as a module: "
        "python -m torchscan_stages.stages.serve"
    )

from ..pipeline.feedback import figure
from ..pipeline.runner import WORKLOAD_KEYS, StageContext, record_execution, stage_main

WRITES = ("reports/serve.json", "metrics/serve.json", "metrics/serve.evidence.json")
KEYS = (*WORKLOAD_KEYS, "serve")


def run(ctx: StageContext) -> None:
    from ..pipeline.evidence import evidence_of
    from ..pipeline.runner import complete_value
    from ..pipeline.serving import counted_stream, served_handler, stream_handler
    from ..pipeline.workload import build_workload, thread_settings
    from ..serve.measure import measure_served
    from ..serve.metrics import served_metrics

    cfg = ctx.config
    built = build_workload(cfg)
    if cfg.serve.max_new_tokens is None:
        handler, samples = served_handler(built, cfg.serve.max_batch)
    else:  # a causal LM's token streams: one prompt row per request
        handler, samples = stream_handler(built, cfg)
    with thread_settings(cfg.threads), ctx.timed():
        report = measure_served(
            handler,
            samples,
            scenario=cfg.serve.scenario,
            options=cfg.serve.options(),
            device=built.device,
            name=built.name,
        )
    record_execution(report, built.precision)
    counts: dict[str, Any] = {}
    if report.tokens is not None:  # a stream's prefill and decode FLOPs, counted once
        counts, note = counted_stream(built, handler, samples[0])
        report = report.model_copy(update={"diagnostics": [*report.diagnostics, note]})
    ctx.headline = [
        figure("served p50", report.latency.p50),
        figure("served p99", report.latency.p99),
        figure("achieved", report.achieved_qps),
    ]
    if report.tokens is not None:
        ctx.headline += [
            figure("TTFT p50", report.tokens.ttft.p50),
            figure("TPOT p50", report.tokens.tpot.p50),
            figure("output", report.tokens.tokens_per_s),
            *(figure(key.replace("_", " "), result) for key, result in counts.items()),
        ]
    ctx.write_report(report)
    metrics = {**served_metrics(report), **{k: complete_value(r) for k, r in counts.items()}}
    evidence = {**served_evidence(report), **{k: evidence_of(r) for k, r in counts.items()}}
    ctx.write_metrics(metrics, evidence=evidence)


def served_evidence(report: Any) -> dict[str, Any]:
    """Each metrics key's status and the run's validity warnings (LoadGen's INVALID verdict,
    requests over the bound, a loaded host...): a served figure from an invalid or disturbed
    run is never a full point for history."""
    from ..pipeline.evidence import evidence_of
    from ..serve.metrics import METRIC_FIELDS, served_field

    codes = {d.code for d in report.diagnostics if d.severity in ("warning", "error")}
    return {name: evidence_of(served_field(report, name), codes) for name in METRIC_FIELDS}


if __name__ == "__main__":
    stage_main("serve", KEYS, run, about=__doc__ or "", writes=WRITES)
