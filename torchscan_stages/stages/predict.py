"""Stage ``predict``: the peak memory of one step of the configured model, predicted on fake
tensors (no data, no accelerator), for the allocator ``predict.device`` names.

``predict.device`` defaults to ``cuda`` even on a CPU-only run on purpose: the question is
"will this step fit on the GPU I plan to use", and fake tensors on this CPU model CUDA's
allocator (512-byte blocks) without one; ``predict.device=cpu`` predicts tracked CPU tensors.

With ``predict.sharding: fsdp2`` the model is built on ``meta``, ``fully_shard``-ed (every
item of each ``nn.ModuleList``, then the root: ``predict.entry.shard_module_lists``) on a
fake world of ``predict.world_size`` ranks and materialised with ``to_empty``: the figures
are one rank's (``pipeline/predict_step.py`` builds the step; ``predict_memory`` picks the
predictor). ``predict.batches`` predicts the same step at each ``input.kwargs.batch_size``
for the peak-vs-batch curve."""

from __future__ import annotations

from typing import Any

from ..pipeline.feedback import figure
from ..pipeline.runner import COUNT_KEYS, StageContext, complete_value, stage_main

KEYS = (*COUNT_KEYS, "predict")  # not threads: counts do not depend on it
WRITES = ("reports/predict.json", "metrics/predict.json", "metrics/predict.evidence.json")


def run(ctx: StageContext) -> None:
    from ..pipeline.predict_step import predict_configured
    from ..pipeline.workload import workload_name
    from ..predict.assemble import headline_result
    from ..report import BatchPoint

    settings = ctx.config.predict
    name = f"{workload_name(ctx.config)} {settings.mode}" + (
        f" ({settings.optimizer})" if settings.mode == "training" else ""
    )
    if settings.sharding == "fsdp2":
        name += f", FSDP2 rank 0 of {settings.world_size}"
    elif settings.sharding == "ddp":
        name += f", DDP rank 0 of {settings.world_size}"
    report = predict_configured(ctx.config, None, name)
    # each point: the figure its verdict judged (a training step's steady state)
    curve = [
        BatchPoint(batch=batch, peak=headline_result(point), fits=point.fits)
        for batch in sorted(set(settings.batches))
        for point in [predict_configured(ctx.config, batch)]
    ]
    report = report.model_copy(update={"batch_curve": curve})
    metrics: dict[str, Any] = {"predicted_peak_bytes": complete_value(report.peak)}
    if report.steady_state_peak is not None:
        metrics["predicted_steady_state_bytes"] = complete_value(report.steady_state_peak)
    if report.resident_bytes is not None:
        metrics["predicted_resident_bytes"] = complete_value(report.resident_bytes)
    for category, result in report.by_category.items():
        metrics[f"predicted_{category}_bytes"] = complete_value(result)
    if report.fits is not None:
        metrics["predicted_fits"] = int(report.fits)
    for point in curve:  # the fits grid: one key per batch (a sweep adds world sizes)
        metrics[f"predicted_peak_bytes_batch_{point.batch}"] = complete_value(point.peak)
        if point.fits is not None:
            metrics[f"predicted_fits_batch_{point.batch}"] = int(point.fits)
    from ..pipeline.evidence import evidence_of
    from ..render.caveats import prediction_caveats

    caveats = prediction_caveats(report)  # the peak's warnings, on every figure built on it
    evidence = {key: evidence_of(None) for key in metrics}
    evidence["predicted_peak_bytes"] = evidence_of(report.peak, caveats)
    for category, result in report.by_category.items():
        evidence[f"predicted_{category}_bytes"] = evidence_of(result, caveats)
    for point in curve:
        evidence[f"predicted_peak_bytes_batch_{point.batch}"] = evidence_of(point.peak, caveats)
    for key, value in metrics.items():
        if key.startswith("predicted_fits") and value is not None:
            evidence[key] = evidence_of(report.peak, caveats)
    # a CUDA prediction's warnings (kernels it could not follow) on the number's own line
    judged = headline_result(report)
    label = "predicted steady-state peak" if judged is not report.peak else "predicted peak"
    ctx.headline = [figure(label, judged, prediction_caveats(report))]
    ctx.write_report(report)
    ctx.write_metrics(metrics, evidence=evidence)


if __name__ == "__main__":
    stage_main("predict", KEYS, run, about=__doc__ or "", writes=WRITES)
