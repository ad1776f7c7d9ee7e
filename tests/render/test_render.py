"""render_report / render_index: content, order, escaping, offline-ness and refusals."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import record_samples
import render_samples as samples
import torch
from served_reports import capacity_sample, served_sample

from torchscan_stages import Diagnostic, measure_flops
from torchscan_stages.render import render_index, render_report
from torchscan_stages.render.analysis_view import build_tree, counted_layers
from torchscan_stages.render.common import reason_for
from torchscan_stages.render.html import AnyReport
from torchscan_stages.render.svg import Bar, bar_chart, nice_ticks
from torchscan_stages.render.sweep_view import sweep_key

ALL: dict[str, Callable[[], AnyReport]] = {
    "analysis": samples.analysis_report,
    "flops": samples.flop_report,
    "benchmark": samples.benchmark_report,
    "report_diff": samples.report_diff,
    "benchmark_comparison": samples.comparison,
    "prediction": samples.prediction_report,
    "history": samples.history_report,
    "served": lambda: served_sample(tokens=3, name="<script>alert(1)</script>").model_copy(
        update={"provenance": samples.provenance(stage="serve")}
    ),
    "served_capacity": lambda: capacity_sample().model_copy(
        update={
            "provenance": samples.provenance(stage="serve"),
            "name": "<script>alert(1)</script>",
        }
    ),
    "sweep_summary": lambda: record_samples.sweep_sample("<script>alert(1)</script>").model_copy(
        update={"provenance": samples.provenance(stage="sweep_summary")}
    ),
    "job_status": lambda: record_samples.job_status_sample("<script>alert(1)</script>").model_copy(
        update={"provenance": samples.provenance(stage="latency")}
    ),
    # fingerprints: the environment alone, never a run (so no commit on their pages)
    "environment": lambda: _fingerprint(record_samples.environment_sample()),
    "sources": lambda: _fingerprint(record_samples.sources_sample()),
}


def _fingerprint(report: AnyReport) -> AnyReport:
    environment = report.provenance.environment.model_copy(
        update={"cpu_model": "<script>alert(1)</script>"}
    )
    provenance = report.provenance.model_copy(update={"environment": environment})
    return report.model_copy(update={"provenance": provenance})


# any URL-bearing reference to a resource: src/href/url()/@import/srcset/<link>
RESOURCE = re.compile(
    r"""(?:\bsrc\s*=|\bhref\s*=\s*(?!["']?#)|url\s*\(|@import|\bsrcset\s*=|<link\b|<script\b)""",
    re.IGNORECASE,
)


def assert_offline(html: str) -> None:
    """No resource reference at all: only in-page #anchors, no scripts, fonts or images."""
    found = RESOURCE.findall(html)
    assert not found, f"external resource references: {found[:5]}"
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html
    assert "@font-face" not in html


@pytest.mark.parametrize("kind", sorted(ALL))
def test_every_kind_renders_offline_with_status_first(kind: str) -> None:
    report = ALL[kind]()
    html = render_report(report)
    assert html.startswith("<!DOCTYPE html>")
    assert_offline(html)
    # status and diagnostics come before every number section
    status_at = html.index('class="status st-')
    for marker in ('id="r0-totals"', 'id="r0-execution"', 'id="r0-operators"', 'id="r0-verdicts"'):
        if marker in html:
            assert status_at < html.index(marker), marker
    assert '<details class="prov" id="r0-provenance">' in html
    assert "@media print" in html and "@media (max-width: 640px)" in html
    # the git commit in provenance, for every kind with a run (the fingerprints have none)
    has_run = report.provenance.run is not None
    assert ("0123456789abcdef0123456789abcdef01234567" in html) == has_run
    assert has_run == (kind not in ("environment", "sources"))


@pytest.mark.parametrize("kind", sorted(ALL))
def test_report_strings_are_escaped(kind: str) -> None:
    html = render_report(ALL[kind]())
    assert "<script>" not in html
    if kind != "benchmark":  # the benchmark sample carries it only inside its FLOP report
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_analysis_page_figures() -> None:
    report = samples.analysis_report()
    html = render_report(report)
    # known module FLOPs = stem 884,736 + 2 convs * 4,718,592 + 3 ReLU * 16,384 + pool 16,384
    # + fc 320 = 10,387,776 (blocks.odd is unknown) -> a lower bound, shown as >= 10.4 M
    assert report.totals.module_flops.known_value == 10_387_776
    assert "≥ 10.4 MFLOPs" in html
    assert 'title="lower bound ≥ 10,387,776 FLOPs' in html
    # parameters: 432 + 2 * 2,304 + 170 = 5,210
    assert ">5,210<" in html
    # unavailable operator FLOPs: a dash with the reason, never a zero
    assert "operator_pass_skipped: operator FLOPs were not requested" in html
    # the layer tree nests by depth with <details>; depth < 2 open, deeper closed
    assert html.count('<details open><summary class="row">') == 2  # root, blocks
    assert html.count('<details><summary class="row">') == 2  # blocks.0, blocks.1
    assert "Not drawn (unavailable): &lt;script&gt;" in html


def test_layer_tree_accepts_post_order_records() -> None:
    report = samples.analysis_report()
    pre = build_tree(report.layers)
    post = build_tree(list(reversed(report.layers)))
    assert [n.record.path for n in pre] == [""]
    assert [n.record.path for n in post] == [""]
    assert sorted(c.record.path for c in post[0].children) == sorted(
        c.record.path for c in pre[0].children
    )
    # leaves only: stem, stem_act, 2 x (conv, act), odd, pool, fc = 9 counted layers
    assert len(counted_layers(report)) == 9


def test_benchmark_page_figures() -> None:
    report = samples.benchmark_report()
    assert report.latency is not None and report.latency.stats is not None
    html = render_report(report)
    assert html.count('<circle class="dot"') == 40  # one dot per raw block
    assert "44.7 MiB" in html  # 46,827,520 B / 1,048,576 = 44.66 MiB
    assert 'title="46,827,520 bytes' in html
    assert "Not drawn (unavailable): accelerator_allocated" in html
    assert "≥ 393 MiB" in html  # run phase: partial 412,000,256 B = 392.9 MiB
    assert "Instrumented:" in html


def test_comparison_check_first_and_withheld_marked() -> None:
    html = render_report(samples.comparison(check_passed=False))
    assert (
        html.index('id="r0-check"') < html.index('id="r0-status"') < html.index('id="r0-verdicts"')
    )
    assert '<section class="check c-failed"' in html
    assert html.count('<tr class="withheld">') == 2
    body = html.split("</style>", 1)[1]
    assert "b-faster" not in body and "v-faster" not in body  # never styled as a gain
    # ratio = 6.8 ms / 12.3 ms block medians = 0.553; CI = ratio * (0.97, 1.03)
    assert "[0.536, 0.569]" in html and "95 % confidence" in html
    passed = render_report(samples.comparison(check_passed=True))
    assert '<tr class="v-faster">' in passed and "withheld" not in passed.split("Verdicts")[1][:400]


def test_report_diff_page() -> None:
    html = render_report(samples.report_diff())
    # 10,321,920 - 5,603,328 = 4,718,592 FLOPs -> "+4.72 MFLOPs"
    assert "+4.72 MFLOPs" in html
    assert "×1.84" in html  # 10,321,920 / 5,603,328 = 1.842
    assert 'title="no numeric delta: status partial"' in html


def test_paths_and_json_text_and_atomic_write(tmp_path: Path) -> None:
    report = samples.flop_report()
    path = report.save(tmp_path / "flops.json")
    from_path = render_report(path)
    assert render_report(str(path)) == from_path
    assert render_report(path.read_text()) == from_path
    out = tmp_path / "out" / "page.html"
    assert render_report(report, out) == out.read_text(encoding="utf-8")
    assert [p.name for p in out.parent.iterdir()] == ["page.html"]  # no temp file left


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{not json", "malformed JSON"),
        ('{"kind": "weather", "schema_version": 1}', "unknown report kind 'weather'"),
        ('{"kind": "flops", "schema_version": 99}', "unsupported schema_version 99"),
        ('{"kind": "flops", "schema_version": 1}', "invalid flops report"),
    ],
)
def test_bad_report_raises_and_writes_nothing(tmp_path: Path, source: str, message: str) -> None:
    out = tmp_path / "page.html"
    with pytest.raises(ValueError, match=message):
        render_report(source, out)
    with pytest.raises(ValueError, match=message):
        render_index([samples.flop_report(), source], out)
    assert list(tmp_path.iterdir()) == []


def test_wrong_argument_type() -> None:
    with pytest.raises(TypeError, match="report_or_path must be a report model"):
        render_report(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reports_or_paths must be an iterable"):
        render_index("a.json")
    with pytest.raises(ValueError, match="empty"):
        render_index([])
    with pytest.raises(ValueError, match="neither a JSON document nor an existing file"):
        render_report("missing.json")


def _sweep() -> list[object]:
    # latency(t) = 20 ms / t**0.8; bf16 is 0.6x of fp32
    return [
        samples.benchmark_report(
            threads=t, precision=p, median=0.02 / t**0.8 * (0.6 if p == "bf16" else 1.0)
        )
        for p in ("fp32", "bf16")
        for t in (1, 2, 4)
    ]


def test_index_with_sweep(tmp_path: Path) -> None:
    reports = [*_sweep(), samples.analysis_report(), samples.comparison()]
    html = render_index(reports, tmp_path / "index.html", title="Threads x precision")  # type: ignore[arg-type]
    assert_offline(html)
    assert "<title>Threads x precision</title>" in html
    assert 'id="sweep"' in html
    # one section per report, ids prefixed so they stay unique
    assert all(f'id="r{i}-top"' in html for i in range(1, 9))
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))
    # 2 precisions -> 2 polylines per chart, 3 thread counts each
    assert html.count('<polyline class="ln s0"') == 2 and html.count('<polyline class="ln s1"') == 2
    # fp32 at 1 thread: 20 ms; throughput 32 samples / 20 ms = 1,600 samples/s -> "1.60 k"
    fp32_one = samples.benchmark_report(threads=1, precision="fp32", median=0.02)
    assert fp32_one.latency is not None
    assert fp32_one.latency.warmed.value == pytest.approx(0.0201, rel=0.01)
    assert sweep_key(fp32_one) == ("fp32", 1)


def test_index_without_sweep_has_no_sweep_section() -> None:
    html = render_index([samples.analysis_report(), samples.flop_report()])
    assert 'id="sweep"' not in html and 'id="r2-top"' in html


def test_svg_escapes_and_partial_bars() -> None:
    bars = [
        Bar("<b>x</b>", 10.0, "complete", "10", "10 exactly"),
        Bar("y", 5.0, "partial", "≥ 5", "lower bound 5"),
    ]
    svg = str(bar_chart(bars, label="a<b", missing=["<i>z</i>"]))
    assert "<b>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg
    assert 'class="bar part"' in svg and "&lt;i&gt;z&lt;/i&gt;" in svg
    assert nice_ticks(0.0, 9.3) == [0.0, 2.5, 5.0, 7.5, 10.0]  # (9.3 - 0) / 4 = 2.3 -> step 2.5


def test_big_report_size() -> None:
    report = samples.big_analysis_report(5000)
    assert len(report.layers) == 5000
    html = render_report(report)
    size = len(html.encode("utf-8"))
    # 5,000 records > LAZY_LAYERS (2,000): the tree is compact JSON, no static rows
    assert size < 1_000_000, f"{size:,} bytes"
    assert html.count('<div class="row">') + html.count('<summary class="row">') == 0
    data = json.loads(html.split('id="r0-tree-data">', 1)[1].split("</script>", 1)[0])
    assert len(data["p"]) == 5000  # one parent index per record


def test_profile_only_report_is_not_shown_unavailable() -> None:
    full = samples.benchmark_report()
    profile_only = full.model_copy(
        update={"latency": None, "memory": None, "rss": None, "flops": None}
    )
    page = render_index([profile_only])
    # the index names the pass it holds and shows the operators table as complete evidence
    assert "Workload benchmark (profile)" in page
    overview = page.split('<section id="overview">', 1)[1].split("</section>", 1)[0]
    assert "complete" in overview and "unavailable" not in overview


def test_flop_report_shows_its_tensor_product_share() -> None:
    a, b = torch.randn(3, 5), torch.randn(5, 7)
    report = measure_flops(lambda: (a @ b).relu())
    html = render_report(report)
    # mm: 2*3*5*7 = 210 product FLOPs; relu: 3*7 = 21 more -> total 231
    assert 'title="231 FLOPs' in html
    assert "of which tensor products" in html and 'title="210 FLOPs' in html


def test_reason_for_reads_metric_lists() -> None:
    diag = Diagnostic(code="unsupported_module", metric="module_flops,dmas", message="m", path="a")
    assert reason_for([diag], "dmas", "a") == "unsupported_module: m"
    assert reason_for([diag], "macs", "a") is None


def test_metrics_evidence_page_marks_weak_points() -> None:
    from torchscan_stages.report import MetricEvidence, MetricsEvidence

    report = MetricsEvidence(
        provenance=samples.provenance(),
        stage="latency",
        metrics={
            "warmed_median_s": MetricEvidence(status="complete", warnings=["too_few_blocks"]),
            "first_call_s": MetricEvidence(status="complete"),
        },
    )
    html = render_report(report)
    assert "metrics/latency.json" in html and "Evidence behind committed metrics" in html
    rows = html.split('<table class="evidence">', 1)[1].split("</table>", 1)[0]
    first, warmed = rows.split("<tr>")[2:4]  # sorted keys: first_call_s, warmed_median_s
    assert "first_call_s" in first and ">full<" in first
    assert "warmed_median_s" in warmed and ">weak<" in warmed and "too_few_blocks" in warmed
