"""print(report): every report kind prints a few lines for a person; repr keeps every field."""

from __future__ import annotations

import torch

from torchscan_stages import (
    crawl_module,
    measure_flops,
    measure_peak_memory,
    predict_peak_memory,
)
from torchscan_stages.report import REPORT_TYPES, Diagnostic
from torchscan_stages.report.brief import brief_text, ratio_interval


def test_a_prediction_prints_the_figure_fits_decides_on() -> None:
    def step() -> None:
        net = torch.nn.Linear(16, 16)  # 16*16 + 16 = 272 parameters, 1,088 B
        net(torch.ones(4, 16)).sum().backward()

    report = predict_peak_memory(step, device="cpu", capacity_bytes=2**20, name="step")
    text = str(report)
    lines = text.splitlines()
    assert lines[0] == "predicted peak memory 'step' on cpu"
    assert report.headline == "peak"  # no optimizer: no second step to differ from the first
    assert lines[1].split()[:2] == ["[ok]", "peak"]
    # the fits line names the capacity (2**20 B = 1.00 MiB) and the figure it judged
    assert "fits in 1.00 MiB: yes (peak + 0 B resident, against the capacity)" in text
    assert len(text) < 1000  # a summary, not pydantic's several-kB repr
    assert repr(report).startswith("PredictionReport(")  # the full form stays for debugging


def test_analysis_flops_and_memory_print_their_headlines() -> None:
    model = torch.nn.Linear(3, 2)
    analysis = str(crawl_module(model, (3,)))
    assert analysis.splitlines()[0] == "model cost of Linear (full, 1 layer records)"
    assert "parameters" in analysis and " 8 " in analysis  # 3*2 weights + 2 biases
    flops = str(measure_flops(lambda: model(torch.ones(1, 3))))
    assert "12 FLOPs" in flops  # 2 * (1*3*2) multiply-adds of the matmul
    memory = str(measure_peak_memory(lambda: model(torch.ones(1, 3))))
    assert memory.splitlines()[0].startswith("workload on cpu")
    assert "peak (cpu_tracked_tensors)" in memory


def test_diagnostics_are_summed_by_severity_with_their_codes() -> None:
    diagnostics = [
        Diagnostic(code="a", severity="warning", metric="x", message="m"),
        Diagnostic(code="a", severity="warning", metric="y", message="m"),
        Diagnostic(code="b", severity="info", metric="x", message="m"),
    ]
    text = brief_text("title", [("left out", None), ("note", "text")], diagnostics)
    assert text.splitlines() == [
        "title",
        "  note: text",
        "  diagnostics: 2 warning (a); 1 info (b)",
    ]


def test_ratio_interval_forms() -> None:
    assert ratio_interval(None, None, None) == "—"
    assert ratio_interval(1.25, None, None) == "x1.25"
    assert ratio_interval(1.25, 1.2, 1.3) == "x1.25 [1.2, 1.3]"


def test_every_kind_prints_its_brief_not_pydantics_repr() -> None:
    from torchscan_stages.report import BaseReport

    for kind, model in REPORT_TYPES.items():
        assert model.__str__ is BaseReport.__str__, kind  # no kind bypasses report_text


def test_the_pipeline_records_print_what_they_hold() -> None:
    from record_samples import environment_sample, job_status_sample, sweep_sample

    sweep = str(sweep_sample()).splitlines()
    # two jobs, the failed one named with its one-line error
    assert sweep == [
        "sweep summary 'tiny sweep'",
        "  jobs: 2, 1 not completed",
        "  job 1: failed: MemoryError: out of memory",
    ]
    assert str(job_status_sample()).splitlines()[:2] == [
        "sweep job failed",
        "  error: RuntimeError: out of memory",
    ]
    env = environment_sample()
    assert str(env).splitlines()[0] == f"environment {env.provenance.env_hash}"


def test_metrics_evidence_prints_its_weak_points() -> None:
    from torchscan_stages.provenance import build_provenance
    from torchscan_stages.report import MetricEvidence, MetricsEvidence

    warned = MetricEvidence(status="complete", warnings=["too_few_blocks"])
    report = MetricsEvidence(
        provenance=build_provenance(),
        stage="latency",
        metrics={"warmed_median_s": warned, "first_call_s": MetricEvidence(status="complete")},
    )
    assert str(report).splitlines() == [
        "evidence behind metrics/latency.json",
        "  first_call_s: complete",
        "  warmed_median_s: complete with warnings: too_few_blocks (weak point)",
    ]
