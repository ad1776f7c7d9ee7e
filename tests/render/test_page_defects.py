"""HTML defects a reader once met, one test each: what a person reads on the pipeline's page."""

from __future__ import annotations

import html
import re
from types import SimpleNamespace

import render_samples as samples

from torchscan_stages.render import render_index, render_report
from torchscan_stages.render.common import setting_text
from torchscan_stages.report import (
    BenchmarkReport,
    Diagnostic,
    ExecutionRecord,
    MemorySection,
    MetricResult,
    RssSection,
)

CONFIG = {
    "threads": 1,
    "precision": {"name": "fp32", "dtype": "float32", "apply": "cast"},
    "input": {"name": "image", "work_units": 8.0, "unit": "samples"},
    "model": {"name": "cnn"},
}


def _text(page: str) -> list[str]:
    """The page's visible text, one line per element text."""
    stripped = re.sub(r"<style>.*?</style>", "", page, flags=re.S)
    parts = (html.unescape(p).strip() for p in re.split(r"<[^>]+>", stripped))
    return [p for p in parts if p]


def _after(lines: list[str], label: str) -> list[str]:
    return [lines[i + 1] for i, line in enumerate(lines) if line == label]


def _execution(threads: int, calls: dict[str, int], configured: int | None) -> ExecutionRecord:
    """As the pipeline records it: the input's name and, for a timed stage, its threads."""
    return ExecutionRecord(
        device="cpu",
        num_threads=threads,
        num_interop_threads=2,
        grad_enabled=True,
        calls=calls,
        threads=configured,
        input_name="image",
    )


def _rss_report() -> BenchmarkReport:
    # the parent process ran with 2 threads; the child applied the config's threads: 1
    return BenchmarkReport(
        provenance=samples.provenance(config=dict(CONFIG), stage="rss"),
        name="cnn-image-fp32",
        work_units=8,
        unit="samples",
        execution=_execution(2, {}, configured=1),
        rss=RssSection(
            peak=MetricResult.complete(
                300 * 2**20, unit="bytes", scope="process_rss", method="os_accounting"
            ),
            command=["python", "-m", "child"],
            exit_code=0,
            wall_time_s=2.5,
            timed_out=False,
            timeout_s=120.0,
        ),
    )


def _memory_report() -> BenchmarkReport:
    return BenchmarkReport(
        provenance=samples.provenance(config=dict(CONFIG), stage="memory"),
        name="cnn-image-fp32",
        work_units=8,
        unit="samples",
        execution=_execution(1, {"memory": 1}, configured=None),
        memory=MemorySection(
            results=[
                MetricResult.complete(
                    4_194_304, unit="bytes", scope="cpu_tracked_tensors", method="operator_dispatch"
                )
            ]
        ),
    )


def test_rss_threads_are_the_childs_configured_threads() -> None:
    lines = _text(render_report(_rss_report()))
    assert "threads (intra-op / inter-op)" not in lines  # the parent's 2 / 2 is not shown
    assert _after(lines, "threads (intra-op, set in the measured child)") == ["1"]


def test_comparison_shows_each_sides_own_precision() -> None:
    from torchscan_stages.pipeline.candidate import record_sides

    report = samples.comparison()
    assert report.baseline is not None and report.candidate is not None
    assert report.provenance.run is not None
    report.provenance.run.config = {}  # the page never reads the run's config for these
    fp32 = SimpleNamespace(name="fp32", dtype="float32", apply="cast")
    bf16 = SimpleNamespace(name="bf16", dtype="bfloat16", apply="autocast")
    config = SimpleNamespace(
        precision=fp32,
        candidate=SimpleNamespace(precision=bf16),
        threads=3,
        input=SimpleNamespace(name="image", work_units=8.0, unit="samples"),
    )
    record_sides(report, config)  # what the pipeline's compare stage records on each side
    lines = _text(render_report(report))
    assert _after(lines, "precision") == ["fp32 (float32, cast)", "bf16 (bfloat16, autocast)"]
    assert report.baseline.execution.threads == report.candidate.execution.threads == 3


def test_work_per_call_reads_the_same_for_every_pass() -> None:
    memory = _text(render_report(_memory_report()))
    rss = _text(render_report(_rss_report()))
    # the input does 8 samples per call; a report that kept the default (1 call) says so too
    assert _after(memory, "work per call") == ["8 samples (input image)"]
    assert _after(rss, "work per call") == ["8 samples (input image)"]
    assert _after(memory, "workload calls (memory pass)") == ["1 call"]  # not "1 calls"
    assert not any("1 calls" in line for line in memory + rss)


def test_by_module_sections_say_whether_children_are_included() -> None:
    import torch

    from torchscan_stages import crawl_module, measure_flops

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Sequential(torch.nn.Linear(4, 2)))
    x = torch.randn(1, 4)
    crawl = crawl_module(model, args=(x,))  # its operator pass: each module's own operators
    flops = measure_flops(lambda: model(x))  # rolls children up into their ancestors
    assert crawl.operator_flops is not None
    own, rolled = crawl.operator_flops.by_module, flops.by_module
    assert "Sequential" not in own or own["Sequential"].value == 0  # the root did nothing itself
    assert rolled["Sequential"].value == flops.total.value  # the root includes everything
    labels = [line for line in _text(render_index([crawl, flops])) if line.startswith("By module")]
    # own: the two Linear layers ran operators; rolled up: root, both children and the leaf
    assert labels == [
        "By module, its own operators only (submodules not included) (best effort, 2 largest)",
        "By module, including its submodules (best effort, 4 largest)",
    ]


def test_index_shows_shared_provenance_once() -> None:
    page = render_index([_memory_report(), _rss_report(), samples.analysis_report()])
    lines = _text(page)
    # the environment table (cpu model ...) appears once, not once per report
    assert lines.count("Example CPU @ 2.40GHz") == 1
    assert lines.count("Resolved configuration") == 1
    assert lines.count("Provenance shared by every report") == 1
    # each report keeps what differs: its stage
    assert _after(lines, "stage") == ["memory", "rss", "crawl"]
    one = _text(render_report(_memory_report()))
    assert one.count("Example CPU @ 2.40GHz") == 1  # a single report keeps its own


def test_settings_are_formatted_for_people() -> None:
    assert setting_text("warmup_s", 0.2) == "200 ms"  # 0.2 s
    assert setting_text("min_effect", 0.05) == "5 %"
    assert setting_text("confidence", 0.95) == "95 %"
    assert setting_text("resamples", 10000) == "10,000"
    assert setting_text("timer", "time.perf_counter") == "time.perf_counter"
    lines = _text(render_report(samples.comparison()))
    assert not any(re.fullmatch(r"\d+\.\d{4,}", line) for line in lines)  # no raw floats


def test_prediction_section_reads_status_fit_and_parts() -> None:
    # 2 + 2 + 4 MiB + 1536 B + 1 MiB + 512 B = 9 MiB + 2 KiB = 9439232 bytes, over 8 MiB
    lines = _text(render_report(samples.prediction_report()))
    assert "does not fit" in lines
    assert _after(lines, "Predicted peak")[-1] == "9.00 MiB"  # 9439232 / 2**20 = 9.0020 MiB
    assert samples.EVIL in lines  # escaped text, not markup
    partial = _text(render_report(samples.prediction_report(partial=True)))
    assert _after(partial, "Predicted peak")[-1] == "≥ 9.00 MiB"
    assert "undecided" in partial and "fake_unsupported_operator" in partial


def test_raw_numbers_in_free_text_are_made_readable() -> None:
    from torchscan_stages.render.format import humanize_text

    # 10166272 / 2**20 = 9.695 MiB; 4194304 B = 4 MiB exactly; 0.0090446 s to 4 digits
    assert humanize_text("launcher floor 10166272 bytes; x") == "launcher floor 9.70 MiB; x"
    assert humanize_text("budget 4194304 bytes") == "budget 4.00 MiB"
    assert humanize_text("latency = 0.0090446 against 0.01") == "latency = 0.009045 against 0.01"
    # identifiers, versions and short numbers are left alone
    same = "aten.mm.default at layer1.0 ran 12 times, torch 2.13.0, 512 bytes"
    assert humanize_text(same) == same


def test_index_comparison_row_shows_ratio_and_verdict_with_the_why() -> None:
    decided = samples.comparison(check_passed=True)
    latency = decided.deltas[0]
    assert latency.ratio is not None and latency.candidate.value is not None
    assert latency.baseline.value is not None
    # 6.845 ms / 12.38 ms = 0.5528 -> "ratio 0.553", the CI [0.536, 0.569] excludes 1: faster
    assert f"{latency.candidate.value / latency.baseline.value:.3g}" == "0.553"
    withheld = samples.comparison(check_passed=False)
    page = render_index([decided, withheld], title="t")
    body = page[page.index("<tbody>") : page.index("</tbody>")]
    rows = [" ".join(_text(row)) for row in body.split("</tr>")[:2]]
    assert "warmed_latency candidate: 6.85 ms ratio 0.553 (faster)" in rows[0]
    # no ratio, and the reason beside an undecided verdict
    assert "peak_rss candidate: — no ratio (not comparable: candidate child exited" in rows[0]
    # a withheld delta shows no ratio at all (never read as a gain), only why it is withheld
    assert "warmed_latency candidate: 6.85 ms withheld: output check failed" in rows[1]
    assert "0.553" not in rows[1]


def test_index_says_why_a_cpu_run_predicts_for_cuda() -> None:
    prediction = samples.prediction_report()
    assert prediction.device == "cuda"  # the pipeline's predict.device default
    page = render_index([prediction, samples.analysis_report()], title="t")
    body = page[page.index("<tbody>") : page.index("</tbody>")]
    row = " ".join(_text(body.split("</tr>")[0]))
    # 9,439,232 B = 9.00 MiB (render_samples.prediction_report's parts)
    assert "predicted peak (cuda): 9.00 MiB CUDA's allocator, predicted on fake tensors" in row
    assert "no GPU needed" in row
    cpu = prediction.model_copy(update={"device": "cpu"})
    assert "no GPU needed" not in render_index([cpu, samples.analysis_report()], title="t")


def test_index_comparison_row_carries_the_info_note_on_its_metric() -> None:
    note = "bf16 on a CPU without bf16 matrix units: expect the candidate to be slower"
    sample = samples.comparison(check_passed=True)
    info = Diagnostic(code="bf16_without_matrix_units", severity="info",
                      metric="warmed_latency", message=note)  # fmt: skip
    noted = sample.model_copy(update={"diagnostics": [*sample.diagnostics, info]})
    page = render_index([noted, samples.analysis_report()], title="t")
    body = page[page.index("<tbody>") : page.index("</tbody>")]
    row = " ".join(_text(body.split("</tr>")[0]))
    # beside its own metric only: peak_rss keeps just its verdict
    assert f"6.85 ms ratio 0.553 (faster); {note}" in row
    assert row.count(note) == 1
