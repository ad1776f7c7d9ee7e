"""Stage ``predict``: the peak memory of one step of the configured model, predicted on fake
tensors (no data, no accelerator), for the allocator ``predict.device`` names.

``predict.device`` defaults to ``cuda`` even on a CPU-only run on purpose: the question is
"will this step fit on the GPU I plan to use", and fake tensors on this CPU model CUDA's
allocator (512-byte blocks) without one; ``predict.device=cpu`` predicts tracked CPU tensors.

With ``predict.sharding: fsdp2`` the model is built on ``meta``, ``fully_shard``-ed (every
item of each ``nn.ModuleList``, then the root) on a fake world of ``predict.world_size``
ranks and materialised with ``to_empty``: the figures are one rank's. ``predict.batches``
predicts the same step at each ``input.kwargs.batch_size`` for the peak-vs-batch curve."""

from __future__ import annotations

from typing import Any

from ..pipeline.feedback import figure
from ..pipeline.runner import WORKLOAD_KEYS, StageContext, complete_value, stage_main

KEYS = (*WORKLOAD_KEYS, "predict")
WRITES = ("reports/predict.json", "metrics/predict.json")


def _with_batch(cfg: Any, batch: int | None) -> Any:
    """``cfg`` with ``input.kwargs.batch_size = batch`` (refused, naming the key, if absent)."""
    if batch is None:
        return cfg
    kwargs = dict(cfg.input.kwargs)
    if "batch_size" not in kwargs:
        from ..pipeline.schema import ConfigError

        raise ConfigError(
            f"predict.batches: input {cfg.input.target!r} has no kwargs.batch_size to vary"
        )
    kwargs["batch_size"] = batch
    return cfg.model_copy(update={"input": cfg.input.model_copy(update={"kwargs": kwargs})})


def _fully_shard(model: Any, mesh: Any) -> Any:
    """FSDP2 as a generic policy: each item of every ModuleList (transformer blocks), then
    the root; built on meta, materialised afterwards as fake CPU tensors."""
    import torch
    from torch.distributed.fsdp import fully_shard

    for module in list(model.modules()):
        if isinstance(module, torch.nn.ModuleList):
            for item in module:
                if any(True for _ in item.parameters()):
                    fully_shard(item, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.to_empty(device="cpu")
    return model


def step_workload(ctx: StageContext, batch: int | None = None) -> Any:
    """Build model and inputs from the config and run one step; called inside fake mode.

    Returns a zero-argument workload, or with ``predict.sharding: fsdp2`` a ``step(mesh)``,
    with ``ddp`` a ``step(wrap)`` (``wrap`` stands where DistributedDataParallel would).

    Training uses a synthetic loss (mean of squared outputs): its own bytes are a scalar,
    while the backward pass it starts touches every activation the real loss would.
    """
    import contextlib

    import torch

    from ..pipeline.precision import applied, training_step
    from ..pipeline.workload import build_model_and_inputs

    settings = ctx.config.predict
    cfg = _with_batch(ctx.config, batch)
    sharded = settings.sharding == "fsdp2"
    precision = applied(cfg.precision)
    training = settings.mode == "training"

    ddp = settings.sharding == "ddp"

    def workload(mesh: Any = None) -> None:  # mesh: the fake world's, or DDP's wrap
        # cast: built in the dtype (fake parameters refuse .to); sharded: on meta first
        with precision.building(), torch.device("meta") if sharded else contextlib.nullcontext():
            model, inputs, keyword_inputs = build_model_and_inputs(cfg)
        if sharded:
            model = _fully_shard(model, mesh)
            inputs, keyword_inputs = _on_cpu((inputs, keyword_inputs))
        elif ddp:
            model = mesh(model)
        model.train(training)
        if not training:
            with torch.no_grad(), precision.region("cpu"):
                model(*inputs, **keyword_inputs)
            return
        training_step(model, inputs, keyword_inputs, precision, optimizer=settings.optimizer)

    return workload


def _on_cpu(tree: Any) -> Any:
    """Meta inputs as CPU tensors of the same shape and dtype (values: zeros; on fake
    tensors only shapes matter)."""
    import torch
    from torch.utils._pytree import tree_map_only

    return tree_map_only(
        torch.Tensor,
        lambda t: torch.zeros(t.shape, dtype=t.dtype) if t.device.type == "meta" else t,
        tree,
    )


def _predict(ctx: StageContext, batch: int | None, name: str | None = None) -> Any:
    from ..predict import predict_peak_memory
    from ..predict.ddp import predict_ddp_peak_memory
    from ..predict.sharded import predict_sharded_peak_memory

    settings = ctx.config.predict
    if settings.sharding == "ddp":
        return predict_ddp_peak_memory(
            step_workload(ctx, batch),
            world_size=settings.world_size,
            device=settings.device,
            capacity_bytes=settings.capacity_bytes,
            name=name,
        )
    if settings.sharding == "fsdp2":
        return predict_sharded_peak_memory(
            step_workload(ctx, batch),
            world_size=settings.world_size,
            device=settings.device,
            capacity_bytes=settings.capacity_bytes,
            name=name,
        )
    return predict_peak_memory(
        step_workload(ctx, batch),
        device=settings.device,
        capacity_bytes=settings.capacity_bytes,
        name=name,
    )


def run(ctx: StageContext) -> None:
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
    report = _predict(ctx, None, name)
    # each point: the figure its verdict judged (a training step's steady state)
    curve = [
        BatchPoint(batch=batch, peak=headline_result(point), fits=point.fits)
        for batch in sorted(set(settings.batches))
        for point in [_predict(ctx, batch)]
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
    from ..render.caveats import prediction_caveats

    # a CUDA prediction's warnings (kernels it could not follow) on the number's own line
    judged = headline_result(report)
    label = "predicted steady-state peak" if judged is not report.peak else "predicted peak"
    ctx.headline = [figure(label, judged, prediction_caveats(report))]
    ctx.write_report(report)
    ctx.write_metrics(metrics)


if __name__ == "__main__":
    stage_main("predict", KEYS, run, about=__doc__ or "", writes=WRITES)
