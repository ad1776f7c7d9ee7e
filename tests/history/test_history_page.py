"""The history page: offline, escaped, every kind of point drawn as itself; then in Chromium.

The history is synthetic (tests/history/synthetic.py): commits 0-5 at 10 ms, 6-9 at 13 ms
(a x1.3 step), commit 3's median only partial in its cached report, commit 8 not
measured (stale), and an environment change at commit 10 (same 13 ms afterwards).
"""

from __future__ import annotations

import html as html_lib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic import fast_repo, lock, md5, metrics

from torchscan_stages.history import detect_steps, history_document, read_history
from torchscan_stages.render import render_report
from torchscan_stages.render.history_chart import axis
from torchscan_stages.report import MetricResult, load_report, report_text
from torchscan_stages.report.history import HistoryPoint, HistoryReport

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS), str(TESTS / "render")]
from chromium import CHROMIUM, SKIP_REASON, load, measure, png_size  # noqa: E402
from latency_reports import BASE, latency_report  # noqa: E402
from test_render import assert_offline  # noqa: E402

SRC = "x = 1\n"
EVIL = "<script>alert(1)</script>"


def _cache_partial(repo: Path) -> str:
    """A cached latency report whose warmed median is partial (a lower bound of 9 ms)."""
    report = latency_report(list(BASE), EVIL)
    assert report.latency is not None
    report.latency.warmed = MetricResult.partial(
        0.009, unit="s", scope="warmed_block_average", method="block_median"
    )
    text = report_text(report)
    folder = repo / ".dvc" / "cache" / "files" / "md5" / md5(text)[:2]
    folder.mkdir(parents=True)
    (folder / md5(text)[2:]).write_text(text)
    return md5(text)


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> HistoryReport:
    repo = tmp_path_factory.mktemp("page")
    partial = _cache_partial(repo)
    commits = []
    for i in range(14):
        level = 0.010 if i < 6 else 0.013
        files = {"src.py": SRC, "dvc.lock": lock(SRC, env="a" if i < 10 else "b"),
                 **metrics(level, 92_500_000)}  # fmt: skip
        if i == 3:  # the flat median is absent; the cached report says partial
            files["dvc.lock"] = lock(SRC, env="a", outs={"latency": partial})
            files["metrics/latency.json"] = '{"throughput_per_s": 800.0}\n'
        if i == 8:
            files["src.py"] = "x = 2\n"  # changed, not measured: stale
        commits.append(files)
    fast_repo(repo, commits)
    who = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@l", "GIT_COMMITTER_NAME": "t"}
    env = {**who, "GIT_COMMITTER_EMAIL": "t@l", "PATH": "/usr/bin:/bin"}
    subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", EVIL], cwd=repo, check=True, env=env
    )
    history = read_history(repo)
    return history_document(history, detect_steps(history), {"limit": 200})


def _text(dom: str) -> str:
    body = dom.split("</style>", 2)[-1]
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_document_and_page(document: HistoryReport) -> None:
    median = next(s for s in document.series if s.name == "warmed_median_s")
    statuses = [p.status for p in median.points]
    assert statuses[3] == "partial" and statuses[8] == "unavailable"
    assert [(g.start, g.stop) for g in median.segments] == [(0, 10), (10, 15)]
    (step,) = median.steps
    assert step.ratio == pytest.approx(1.3) and step.single_commit
    page = render_report(document)
    assert page.startswith("<!DOCTYPE html>")
    assert_offline(page)
    assert EVIL not in page and html_lib.escape(EVIL, quote=False) in page
    assert 'class="mk s0 hollow"' in page  # the partial point
    assert 'class="na"' in page  # the stale point: a cross, never a zero
    assert 'class="brk"' in page and "env changed" in page
    assert 'class="steprange"' in page
    sha = document.commits[6].sha
    assert f'href="#r0-c-{sha[:12]}"' in page and f"id='r0-c-{sha[:12]}'" in page


def test_a_saved_history_is_a_report_kind(document: HistoryReport, tmp_path: Path) -> None:
    path = document.save(tmp_path / "history.json")
    assert load_report(path) == document  # every field back, exactly
    page = render_report(path)  # the renderer takes the loaded model, like any kind
    assert '<section class="report history"' in page and "x1.3 [" in page
    damaged = json.loads(path.read_text())
    damaged["series"][0]["segments"][1]["start"] = 11  # no longer tiles the points
    with pytest.raises(ValueError, match=r"invalid history report at series\.0: .*segments\.1"):
        load_report(json.dumps(damaged))


def _chart_of(page: str, metric: str) -> str:
    return page.split(f"{metric} (", 1)[1].split("</svg>", 1)[0]


def test_people_read_the_headline_first_and_lines_never_cross_a_break(
    document: HistoryReport,
) -> None:
    page = render_report(document)
    # latency and throughput before the peak; the flat 92,500,000 B peak folded away
    order = [page.index(f"<h3 id='r0-m{n}'>{s.metric}") for n, s in enumerate(document.series)]
    names = [s.metric for _, s in sorted(zip(order, document.series, strict=True))]
    assert names == [
        "latency/warmed_median_s", "latency/throughput_per_s",
        "memory/peak_cpu_tracked_tensors_bytes",
    ]  # fmt: skip
    folded = page.split("<details class='flat'>", 1)[1]
    assert "1 series that did not change" in folded and "peak_cpu_tracked_tensors_bytes" in folded
    median = _chart_of(page, "latency/warmed_median_s")
    # two segments (env break after commit 9): two lines, each left of or right of the break
    lines = re.findall(r'<polyline class="ln s0" points="([^"]+)"', median)
    brk = float(re.search(r'<line class="brk" x1="([\d.]+)"', median).group(1))  # type: ignore[union-attr]
    assert len(lines) == 2
    xs = [[float(pair.split(",")[0]) for pair in line.split()] for line in lines]
    assert max(xs[0]) < brk < min(xs[1])
    # a non-negative axis starts at 0: the lowest tick is "0 s"
    ticks = re.findall(r'text-anchor="end">([^<]+)</text>', median)
    assert ticks[0] == "0 s" and all(t.endswith(("ms", " s")) for t in ticks)


def _point(value: float, low: float | None = None, high: float | None = None) -> HistoryPoint:
    return HistoryPoint(commit="c", index=0, status="complete", value=value, low=low, high=high)


def test_byte_axes_read_in_binary_units_from_zero() -> None:
    # 92,500,000 B = 88.2 MiB, padded 8% to 95.3 MiB: 5 ticks need a step >= 23.8 -> 25 MiB
    ticks, labels = axis([_point(92_500_000.0)], "B")
    assert labels == ["0 MiB", "25 MiB", "50 MiB", "75 MiB", "100 MiB"]
    assert ticks[1] == 25 * 2**20
    # 3100 B * 1.08 = 3348 B = 3.27 KiB: a step >= 0.82 -> 1 KiB, up to 4 KiB
    _, small = axis([_point(3000.0, 2900.0, 3100.0)], "B")
    assert small == ["0 KiB", "1 KiB", "2 KiB", "3 KiB", "4 KiB"]
    _, signed = axis([_point(-5.0), _point(5.0)], "")
    assert signed[0].startswith("-")  # a delta may go below zero: the axis follows


# every tick label's box against its chart's box, and the widest table against the page
GEOMETRY = """
document.querySelectorAll("details").forEach(function (d) { d.open = true; });
var cut = [];
document.querySelectorAll("svg.chart").forEach(function (svg) {
  var box = svg.getBoundingClientRect();
  svg.querySelectorAll("text").forEach(function (t) {
    var r = t.getBoundingClientRect();
    if (r.left < box.left - 0.5 || r.right > box.right + 0.5) cut.push(t.textContent);
  });
});
var wide = Array.prototype.map.call(document.querySelectorAll("table.hist"),
  function (t) { return t.getBoundingClientRect().width - t.parentNode.clientWidth; });
return {cut: cut, over: Math.max.apply(null, wide),
        charts: document.querySelectorAll("svg.chart").length};
"""


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_no_label_is_clipped_and_no_table_overflows(
    document: HistoryReport, tmp_path: Path
) -> None:
    page = tmp_path / "history.html"
    page.write_text(render_report(document), encoding="utf-8")
    seen = measure(page, tmp_path / "work", GEOMETRY, width=1280)
    assert seen["charts"] == 3 and seen["cut"] == [] and seen["over"] <= 0, seen


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_history_page_in_browser(document: HistoryReport, tmp_path: Path) -> None:
    page = tmp_path / "history.html"
    page.write_text(render_report(document), encoding="utf-8")
    result = load(page, tmp_path / "work", screenshot=True)
    assert result.page_requests == []
    assert "<script" not in result.dom  # the commit subject stayed text
    text = _text(result.dom)
    assert EVIL in text
    # steps before the charts: status first, as on every page
    assert text.index("Steps") < text.index("Metrics over commits") < text.index("Commits #")
    assert "x1.3 [" in text  # the step's ratio and interval in the steps table
    assert result.screenshot is not None and png_size(result.screenshot) == (1280, 2000)
    assert result.screenshot.stat().st_size > 30_000
