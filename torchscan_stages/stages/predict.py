"""Stage ``predict``: the peak memory of one step of the configured model, predicted on fake
tensors (no data, no accelerator), for the allocator ``predict.device`` names."""

from __future__ import annotations

from typing import Any

from ..pipeline.feedback import figure
from ..pipeline.runner import WORKLOAD_KEYS, StageContext, complete_value, stage_main

KEYS = (*WORKLOAD_KEYS, "predict")


def step_workload(ctx: StageContext) -> Any:
    """Build model and inputs from the config and run one step; called inside fake mode.

    Training uses a synthetic loss (mean of squared outputs): its own bytes are a scalar,
    while the backward pass it starts touches every activation the real loss would.
    """
    import torch

    from ..pipeline.precision import applied, training_step
    from ..pipeline.workload import build_model_and_inputs

    cfg, settings = ctx.config, ctx.config.predict
    precision = applied(cfg.precision)
    training = settings.mode == "training"

    def workload() -> None:
        with precision.building():  # cast: built in the dtype (fake parameters refuse .to)
            model, inputs, keyword_inputs = build_model_and_inputs(cfg)
        model.train(training)
        if not training:
            with torch.no_grad(), precision.region("cpu"):
                model(*inputs, **keyword_inputs)
            return
        training_step(model, inputs, keyword_inputs, precision, optimizer=settings.optimizer)

    return workload


def run(ctx: StageContext) -> None:
    from ..pipeline.workload import workload_name
    from ..predict import predict_peak_memory

    settings = ctx.config.predict
    name = workload_name(ctx.config)
    report = predict_peak_memory(
        step_workload(ctx),
        device=settings.device,
        capacity_bytes=settings.capacity_bytes,
        name=f"{name} {settings.mode}"
        + (f" ({settings.optimizer})" if settings.mode == "training" else ""),
    )
    metrics: dict[str, Any] = {"predicted_peak_bytes": complete_value(report.peak)}
    for category, result in report.by_category.items():
        metrics[f"predicted_{category}_bytes"] = complete_value(result)
    if report.fits is not None:
        metrics["predicted_fits"] = int(report.fits)
    ctx.headline = [figure("predicted peak", report.peak)]
    ctx.write_report(report)
    ctx.write_metrics(metrics)


if __name__ == "__main__":
    stage_main("predict", KEYS, run, about=__doc__ or "")
