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

from ..pipeline.feedback import figure
from ..pipeline.runner import COUNT_KEYS, StageContext, stage_main

KEYS = (*COUNT_KEYS, "predict")  # not threads: counts do not depend on it
WRITES = ("reports/predict.json", "metrics/predict.json", "metrics/predict.evidence.json")


def run(ctx: StageContext) -> None:
    from ..pipeline.predict_step import configured_prediction, prediction_metrics
    from ..predict.assemble import headline_result
    from ..render.caveats import prediction_caveats

    report = configured_prediction(ctx.config)
    metrics, evidence = prediction_metrics(report)
    # the figure fits judged, with a CUDA prediction's warnings on the number's own line
    judged = headline_result(report)
    label = "predicted steady-state peak" if judged is not report.peak else "predicted peak"
    ctx.headline = [figure(label, judged, prediction_caveats(report))]
    ctx.write_report(report)
    ctx.write_metrics(metrics, evidence=evidence)


if __name__ == "__main__":
    stage_main("predict", KEYS, run, about=__doc__ or "", writes=WRITES)
