"""The runner's all-or-nothing write of a stage's outputs."""

from __future__ import annotations

import os
import time
from pathlib import Path

from torchscan_stages.pipeline.runner import commit_outputs
from torchscan_stages.report import STALE_TMP_AGE_S


def test_commit_removes_temporaries_a_killed_stage_left(tmp_path: Path) -> None:
    report, metrics = tmp_path / "reports" / "crawl.json", tmp_path / "metrics" / "crawl.json"
    metrics.parent.mkdir()
    stale = metrics.parent / ".crawl.json.ab_cd123.tmp"  # a SIGKILLed stage's first phase
    fresh = metrics.parent / ".crawl.json.zz_zz999.tmp"  # another write running now
    for path in (stale, fresh):
        path.write_text("partial")
    old = time.time() - 2 * STALE_TMP_AGE_S
    os.utime(stale, (old, old))
    written = commit_outputs({report: '{"a": 1}', metrics: '{"b": 2}'})
    assert written == [report, metrics]
    assert report.read_text() == '{"a": 1}' and metrics.read_text() == '{"b": 2}'
    assert not stale.exists() and fresh.exists()
    assert sorted(p.name for p in metrics.parent.iterdir()) == [
        ".crawl.json.zz_zz999.tmp",
        "crawl.json",
    ]
