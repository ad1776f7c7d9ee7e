"""metrics/<stage>.evidence.json: every metrics file has a sidecar, committed with it, holding
each key's status and validity warnings; a "complete with warnings" value or an undecided
comparison is never a full point. Synthetic reports only (no clock, no DVC)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from latency_reports import BASE, latency_report
from noise_models import SimulatedHost, preempted

from torchscan_stages import LatencyOptions
from torchscan_stages.compare.benchmarks import compare_benchmarks
from torchscan_stages.pipeline.commit import PIPELINE_FILES
from torchscan_stages.pipeline.evidence import comparison_evidence
from torchscan_stages.pipeline.runner import StageContext, commit_outputs
from torchscan_stages.pipeline.sweep import summarize_jobs
from torchscan_stages.report import (
    Diagnostic,
    MetricEvidence,
    MetricsEvidence,
    RunContext,
    load_report,
)
from torchscan_stages.stages.latency import latency_evidence


def _context(tmp_path: Path, stage: str) -> StageContext:
    return StageContext(stage, None, {}, tmp_path, RunContext(stage=stage))  # type: ignore[arg-type]


def test_the_sidecar_is_written_with_the_metrics_and_names_every_key(tmp_path: Path) -> None:
    ctx = _context(tmp_path, "latency")
    warned = MetricEvidence(status="complete", warnings=["too_few_blocks"])
    ctx.write_metrics(
        {"warmed_median_s": 0.33, "first_call_s": None}, evidence={"warmed_median_s": warned}
    )
    written = commit_outputs(ctx.pending)
    metrics, sidecar = (
        tmp_path / "metrics" / "latency.json",
        tmp_path / "metrics" / "latency.evidence.json",
    )
    assert written == [metrics, sidecar]
    assert json.loads(metrics.read_text()) == {"warmed_median_s": 0.33}  # numbers only
    evidence = load_report(sidecar)
    assert isinstance(evidence, MetricsEvidence) and evidence.stage == "latency"
    assert evidence.provenance.torch_version  # with provenance, like every report
    assert evidence.metrics["warmed_median_s"] == warned and not warned.clean
    # a key left out of the metrics file (its value was not complete) is still accounted for
    assert evidence.metrics["first_call_s"].status == "unavailable"


def _warned_latency(codes: list[str]) -> Any:
    report = latency_report(BASE[:1], "one block")
    diagnostics = [
        Diagnostic(code=code, severity="warning", metric="latency.warmed", message=code)
        for code in codes
    ]
    return report.model_copy(update={"diagnostics": diagnostics})


def test_a_warned_latency_is_never_a_full_point() -> None:
    # the issue's point: "warmed median 330 ms (complete with warnings: 1 block(s) < min 7;
    # stopped by the timing backstop; loaded host)"
    report = _warned_latency(["too_few_blocks", "timing_backstop", "loaded_host"])
    metrics = {"warmed_median_s": 0.33, "throughput_per_s": 3.0, "first_call_s": 0.4}
    found = latency_evidence(report, metrics)
    for key in ("warmed_median_s", "throughput_per_s", "warmed_median_s_within_budget"):
        assert found[key].warnings == ["loaded_host", "timing_backstop", "too_few_blocks"]
        assert found[key].status == "complete" and not found[key].clean
        assert "complete with warnings" in (found[key].note or "")
    assert found["first_call_s"].clean  # one first call: no warmed-timing warning applies
    assert latency_evidence(_warned_latency([]), metrics)["warmed_median_s"].clean


def test_an_inconclusive_ratio_carries_no_interval() -> None:
    # 5 blocks a side, 2.6x slower: fewer than min_blocks 10, so inconclusive (the issue's
    # "[1.379, 1.435]" came from such a row); a decided 3x row keeps its interval
    few = compare_benchmarks(
        latency_report(BASE[:5], "b"), latency_report([2.6 * t for t in BASE[:5]], "c")
    )
    weak = comparison_evidence(few)["latency_warmed_ratio"]
    assert weak.verdict == "inconclusive" and weak.interval is None and not weak.clean
    assert {"inconclusive", "too_few_rounds"} <= set(weak.warnings)
    sure = compare_benchmarks(latency_report(BASE, "b"), latency_report([3 * t for t in BASE], "c"))
    strong = comparison_evidence(sure)["latency_warmed_ratio"]
    assert strong.verdict == "slower" and strong.interval is not None and strong.clean
    low, high = strong.interval
    assert low <= 3.0 <= high  # the lower deciles are exactly 3x apart


def test_the_sweep_summary_reads_metrics_not_their_evidence(tmp_path: Path) -> None:
    job = tmp_path / "jobs" / "fp32-t1"
    ctx = _context(job, "latency")
    ctx.write_metrics({"warmed_median_s": 0.01})
    commit_outputs(ctx.pending)
    summary = summarize_jobs([job], tmp_path, listed=True)
    [row] = summary.jobs
    columns = row.model_dump()
    assert columns["latency_warmed_median_s"] == 0.01
    assert not any(key.startswith("latency.evidence") for key in columns)


def test_a_damaged_sidecar_is_refused_in_one_line(tmp_path: Path) -> None:
    ctx = _context(tmp_path, "compare")
    ctx.write_metrics({"latency_warmed_ratio": 2.6})
    commit_outputs(ctx.pending)
    sidecar = tmp_path / "metrics" / "compare.evidence.json"
    document = json.loads(sidecar.read_text())
    document["metrics"]["latency_warmed_ratio"]["verdict"] = "surely"
    sidecar.write_text(json.dumps(document))
    with pytest.raises(ValueError) as caught:
        load_report(sidecar)
    message = str(caught.value)
    assert "\n" not in message and str(sidecar) in message
    assert "metrics.latency_warmed_ratio.verdict" in message


def test_a_verdict_on_a_loaded_host_is_sure_of_its_direction_not_its_size() -> None:
    # 21x on a host where 90% of calls lose 0.5-1.5 ms (simulated): slower (loaded host);
    # the sidecar keeps the verdict and the warning, never the wall-clock interval
    sim = SimulatedHost(preempted(0.9, 1e-3), seed=0)
    result = compare_benchmarks(
        sim.workload(1e-3),
        sim.workload(21e-3),
        check=lambda a, b: True,
        options=LatencyOptions(clock=sim, probe=sim.probe, max_run_time=2.0),
    )
    for key in ("latency_warmed_ratio", "throughput_ratio"):  # throughput = work / latency
        found = comparison_evidence(result)[key]
        assert found.verdict == "slower" and found.interval is None and not found.clean
        assert "verdict_on_loaded_host" in found.warnings


def test_the_commit_recipe_and_dvc_yaml_carry_every_sidecar() -> None:
    # every stage that declares metrics/<stage>.json also declares its sidecar (an out,
    # cache false, persist), and `git add ... metrics ...` takes it with the metrics
    root = Path(__file__).resolve().parents[2]
    stages = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    with_metrics = {name: spec for name, spec in stages.items() if spec.get("metrics")}
    assert set(with_metrics) == {
        "crawl", "flops", "memory", "latency", "rss", "compare", "predict", "serve",
    }  # fmt: skip
    for name, spec in with_metrics.items():
        outs = {next(iter(o)): o[next(iter(o))] for o in spec["outs"] if isinstance(o, dict)}
        assert outs[f"metrics/{name}.evidence.json"] == {"cache": False, "persist": True}
    assert "metrics" in PIPELINE_FILES
    assert (
        "metrics/compare.evidence.json"
        in (root / "pipelines/check_optimisation/dvc.yaml").read_text()
    )
    assert "metrics/latency.evidence.json" in (root / "pipelines/sweep/dvc.yaml").read_text()


def test_a_served_figure_from_a_run_with_warnings_is_never_a_full_point() -> None:
    from served_reports import served_sample

    from torchscan_stages.report import Diagnostic
    from torchscan_stages.stages.serve import served_evidence

    clean = served_evidence(served_sample(tokens=0))
    assert clean["latency_p50_s"].clean  # a complete p50 from a run with no warning
    warned = served_sample(tokens=0).model_copy(
        update={
            "diagnostics": [
                Diagnostic(
                    code="loadgen_invalid", severity="warning", metric="validity", message="m"
                )
            ]
        }
    )
    found = served_evidence(warned)["latency_p50_s"]
    assert found.status == "complete" and found.warnings == ["loadgen_invalid"]
    assert not found.clean  # history weighs it as a weak point


def test_a_predictions_headline_keys_carry_their_own_evidence() -> None:
    import torch

    from torchscan_stages import predict_peak_memory
    from torchscan_stages.pipeline.predict_step import prediction_metrics

    def step() -> None:
        net = torch.nn.Linear(8, 8)
        optimizer = torch.optim.AdamW(net.parameters())
        net(torch.ones(2, 8)).sum().backward()
        optimizer.step()

    report = predict_peak_memory(step, device="cpu", capacity_bytes=2**20)
    metrics, evidence = prediction_metrics(report)
    assert report.steady_state_peak is not None
    # the figure fits judged is a full point, as complete as the report says it is
    key = "predicted_steady_state_bytes"
    assert metrics[key] == report.steady_state_peak.value
    assert evidence[key].status == "complete" and evidence[key].clean
    assert metrics["predicted_fits"] == 1 and evidence["predicted_fits"].clean
