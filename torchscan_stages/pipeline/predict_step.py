"""The predict stage's step, built from the pipeline's config: the model and inputs of
``model``/``input`` in ``precision``, wrapped as ``predict.sharding`` says, one inference or
training step; and its prediction through ``predict_memory``. Kept out of the stage so the
stage only writes what it gets."""

from __future__ import annotations

from typing import Any


def with_batch(cfg: Any, batch: int | None) -> Any:
    """``cfg`` with ``input.kwargs.batch_size = batch`` (refused, naming the key, if absent)."""
    if batch is None:
        return cfg
    kwargs = dict(cfg.input.kwargs)
    if "batch_size" not in kwargs:
        from .schema import ConfigError

        raise ConfigError(
            f"predict.batches: input {cfg.input.target!r} has no kwargs.batch_size to vary"
        )
    kwargs["batch_size"] = batch
    return cfg.model_copy(update={"input": cfg.input.model_copy(update={"kwargs": kwargs})})


def step_workload(config: Any, batch: int | None = None) -> Any:
    """Build model and inputs from the config and run one step; called inside fake mode.

    Returns a zero-argument workload, or with ``predict.sharding: fsdp2`` a ``step(mesh)``,
    with ``ddp`` a ``step(wrap)`` (``wrap`` stands where DistributedDataParallel would).

    Training uses a synthetic loss (mean of squared outputs): its own bytes are a scalar,
    while the backward pass it starts touches every activation the real loss would.
    """
    import contextlib

    import torch

    from ..predict.entry import meta_to_cpu, shard_module_lists
    from .precision import applied, training_step
    from .workload import build_model_and_inputs

    settings = config.predict
    cfg = with_batch(config, batch)
    sharded = settings.sharding == "fsdp2"
    precision = applied(cfg.precision)
    training = settings.mode == "training"

    ddp = settings.sharding == "ddp"

    def workload(mesh: Any = None) -> None:  # mesh: the fake world's, or DDP's wrap
        # cast: built in the dtype (fake parameters refuse .to); sharded: on meta first
        with precision.building(), torch.device("meta") if sharded else contextlib.nullcontext():
            model, inputs, keyword_inputs = build_model_and_inputs(cfg)
        if sharded:
            model = shard_module_lists(model, mesh)
            inputs, keyword_inputs = meta_to_cpu((inputs, keyword_inputs))
        elif ddp:
            model = mesh(model)
        model.train(training)
        if not training:
            with torch.no_grad(), precision.region("cpu"):
                model(*inputs, **keyword_inputs)
            return
        training_step(model, inputs, keyword_inputs, precision, optimizer=settings.optimizer)

    return workload


def predict_configured(config: Any, batch: int | None, name: str | None = None) -> Any:
    """The configured step's PredictionReport: one device, or rank 0 of ``predict.sharding``
    on ``predict.world_size`` ranks (``predict_memory`` chooses the predictor)."""
    from ..predict.entry import predict_memory

    settings = config.predict
    sharded = settings.sharding in ("fsdp2", "ddp")
    return predict_memory(
        step_workload(config, batch),
        sharding=settings.sharding if sharded else None,
        world_size=settings.world_size if sharded else None,
        device=settings.device,
        capacity_bytes=settings.capacity_bytes,
        name=name,
    )


def configured_prediction(config: Any) -> Any:
    """The predict stage's report: the configured step, named for people, with its
    peak-vs-batch curve (each point the figure its verdict judged: a training step's steady
    state) at every ``predict.batches`` batch size."""
    from ..predict.assemble import headline_result
    from ..report import BatchPoint
    from .workload import workload_name

    settings = config.predict
    name = f"{workload_name(config)} {settings.mode}"
    if settings.mode == "training":
        name += f" ({settings.optimizer})"
    if settings.sharding in ("fsdp2", "ddp"):
        kind = "FSDP2" if settings.sharding == "fsdp2" else "DDP"
        name += f", {kind} rank 0 of {settings.world_size}"
    report = predict_configured(config, None, name)
    curve = [
        BatchPoint(batch=batch, peak=headline_result(point), fits=point.fits)
        for batch in sorted(set(settings.batches))
        for point in [predict_configured(config, batch)]
    ]
    return report.model_copy(update={"batch_curve": curve})


def prediction_metrics(report: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The flat metrics of a prediction (complete values only) and the evidence behind each
    key: the peak's warnings (kernels a CUDA prediction could not follow) on every figure
    built on it."""
    from ..render.caveats import prediction_caveats
    from .evidence import evidence_of
    from .runner import complete_value

    caveats = prediction_caveats(report)
    metrics: dict[str, Any] = {"predicted_peak_bytes": complete_value(report.peak)}
    evidence: dict[str, Any] = {"predicted_peak_bytes": evidence_of(report.peak, caveats)}
    named = {
        "predicted_steady_state_bytes": report.steady_state_peak,
        "predicted_resident_bytes": report.resident_bytes,
    }
    for key, result in named.items():
        if result is not None:  # the steady state is the headline: its evidence is the peak's
            metrics[key], evidence[key] = complete_value(result), evidence_of(result, caveats)
    for category, result in report.by_category.items():
        metrics[f"predicted_{category}_bytes"] = complete_value(result)
        evidence[f"predicted_{category}_bytes"] = evidence_of(result, caveats)
    fits = [(None, report.fits)] + [(p.batch, p.fits) for p in report.batch_curve]
    for point in report.batch_curve:  # the fits grid: one key per batch
        key = f"predicted_peak_bytes_batch_{point.batch}"
        metrics[key], evidence[key] = complete_value(point.peak), evidence_of(point.peak, caveats)
    for batch, fit in fits:
        if fit is not None:
            key = "predicted_fits" if batch is None else f"predicted_fits_batch_{batch}"
            metrics[key], evidence[key] = int(fit), evidence_of(report.peak, caveats)
    return metrics, evidence
