"""crawl_module on a model another thread is running leaves the shared model's flags alone;
counting is unchanged (docs/bad-input.md, "Workloads")."""

from __future__ import annotations

import threading

import torch
from torch import nn

from torchscan_stages import crawl_module, measure_flops


def test_a_training_thread_never_sees_eval_mode_while_the_model_is_crawled() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 2)).train()
    dropout = model[1]
    seen_eval: list[bool] = []
    stop = threading.Event()

    def train() -> None:  # reads the shared flags as a training step's forward would
        while not stop.is_set():
            seen_eval.append(not dropout.training or not model.training)

    worker = threading.Thread(target=train)
    worker.start()
    try:
        reports = [crawl_module(model, (8,)) for _ in range(10)]
    finally:
        stop.set()
        worker.join()
    assert seen_eval and not any(seen_eval)  # once eval-mode Dropout in 1 of 10 crawls
    assert model.training and dropout.training
    # the crawl still counts what a crawl alone in the process counts (same parameters)
    alone = crawl_module(model, (8,))
    assert all(r.totals.module_flops == alone.totals.module_flops for r in reports)
    assert reports[0].layers[2].type == "Dropout"


def test_a_model_nested_200_deep_is_counted() -> None:
    model: nn.Module = nn.Linear(4, 4)
    for _ in range(199):  # 200 modules deep: once a RecursionError at 197
        model = nn.Sequential(model)
    report = measure_flops(lambda: model(torch.ones(1, 4)))
    assert report.total.value == 32  # addmm 1x4 @ 4x4: 2 * 1 * 4 * 4 = 32


def test_a_formula_returning_true_counts_no_flop() -> None:
    model = nn.Sequential(nn.Linear(4, 3))
    report = crawl_module(model, (4,), custom_mapping={torch.ops.aten.addmm: lambda *a, **k: True})
    assert report.totals.operator_flops.status != "complete"  # once a complete 1 FLOP
    assert any("returned a boolean True" in d.message for d in report.diagnostics)


def test_a_workload_running_no_operator_has_no_complete_flops() -> None:
    report = measure_flops(lambda: None)  # once a complete 0 FLOPs
    assert report.total.status == "unavailable"
    assert [d.code for d in report.diagnostics] == ["no_operators"]
