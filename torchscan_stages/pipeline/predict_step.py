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
