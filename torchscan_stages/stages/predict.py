"""Stage ``predict``: the peak memory of one step of the configured model, predicted on fake
tensors (no data, no accelerator), for the allocator ``predict.device`` names.

``predict.device`` defaults to ``cuda`` even on a CPU-only run on purpose: the question is
"will this step fit on the GPU I plan to use", and fake tensors on this CPU model CUDA's
allocator (512-byte blocks) without one; ``predict.device=cpu`` predicts tracked CPU tensors."""

from __future__ import annotations

from typing import Any

from ..pipeline.feedback import figure
from ..pipeline.runner import WORKLOAD_KEYS, StageContext, complete_value, stage_main

KEYS = (*WORKLOAD_KEYS, "predict")
WRITES = ("reports/predict.json", "metrics/predict.json")


def step_workload(ctx: StageContext) -> Any:
    """Build model and inputs from the config and run one step; called inside fake mode.

    Training uses a synthetic loss (mean of squared outputs): its own bytes are a scalar,
    while the backward pass it starts touches every activation the real loss would.
    """
    import contextlib

    import torch
    from torch.utils._pytree import tree_flatten

    from ..pipeline.workload import build_model_and_inputs, torch_dtype

    cfg, settings = ctx.config, ctx.config.predict
    dtype = torch_dtype(cfg.precision.dtype)
    cast = cfg.precision.apply == "cast" and dtype != torch.float32
    autocast = cfg.precision.apply == "autocast" and dtype != torch.float32
    training = settings.mode == "training"

    def workload() -> None:
        # cast precision: built in the dtype (torch refuses .to(dtype) on fake parameters);
        # the factories' floating tensors take the default dtype, as a cast would give them
        before = torch.get_default_dtype()
        if cast:
            torch.set_default_dtype(dtype)
        try:
            model, inputs, keyword_inputs = build_model_and_inputs(cfg)
        finally:
            torch.set_default_dtype(before)
        model.train(training)
        amp = torch.autocast("cpu", dtype=dtype) if autocast else contextlib.nullcontext()
        if not training:
            with torch.no_grad(), amp:
                model(*inputs, **keyword_inputs)
            return
        optimizer: torch.optim.Optimizer | None = None
        if settings.optimizer == "adamw":
            optimizer = torch.optim.AdamW(model.parameters())
        elif settings.optimizer == "sgd":
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        with amp:
            outputs = [
                t
                for t in tree_flatten(model(*inputs, **keyword_inputs))[0]
                if isinstance(t, torch.Tensor)
            ]
            loss = sum(t.float().pow(2).mean() for t in outputs if t.is_floating_point())
        loss.backward()  # type: ignore[union-attr]
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad()

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
    stage_main("predict", KEYS, run, about=__doc__ or "", writes=WRITES)
