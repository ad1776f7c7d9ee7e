"""``python -m torchscan_stages render REPORT.json... -o OUT.html``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import render_samples as samples

from torchscan_stages.commands.render import main


def test_one_report_gives_its_page(tmp_path: Path) -> None:
    report = samples.analysis_report().save(tmp_path / "crawl.json")
    out = tmp_path / "page.html"
    assert main([str(report), "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    assert "<title>TinyNet</title>" in html and 'id="r0-layers"' in html


def test_several_reports_give_an_index(tmp_path: Path) -> None:
    paths = [
        samples.benchmark_report(threads=t, median=0.01 / t).save(tmp_path / f"lat{t}.json")
        for t in (1, 2)
    ]
    paths.append(samples.flop_report().save(tmp_path / "flops.json"))
    out = tmp_path / "index.html"
    assert main([*map(str, paths), "-o", str(out), "--title", "Nightly"]) == 0
    html = out.read_text(encoding="utf-8")
    assert "<title>Nightly</title>" in html and 'id="sweep"' in html and 'id="r3-top"' in html


def test_bad_input_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = samples.flop_report().save(tmp_path / "good.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "weather", "schema_version": 1}', encoding="utf-8")
    out = tmp_path / "out.html"
    assert main([str(good), str(bad), "-o", str(out)]) == 1
    assert "unknown report kind 'weather'" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.json"), "-o", str(out)]) == 1
    assert "missing.json: no such report file" in capsys.readouterr().err
    assert not out.exists()
    assert main([str(good)]) == 2  # -o is required
    assert "-o/--output" in capsys.readouterr().err


def test_module_entry_point(tmp_path: Path) -> None:
    report = samples.flop_report().save(tmp_path / "flops.json")
    out = tmp_path / "flops.html"
    done = subprocess.run(
        [sys.executable, "-m", "torchscan_stages", "render", str(report), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}" in done.stdout and out.stat().st_size > 10_000


def test_output_that_is_an_input_report_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = samples.flop_report().save(tmp_path / "a.json")
    second = samples.analysis_report().save(tmp_path / "b.json")
    before = second.read_bytes()
    assert main([str(first), str(second), "-o", str(second)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is one of the input reports" in err and "b.json" in err
    assert second.read_bytes() == before  # the input report is intact
    # the same file reached by another spelling of its path is refused too
    assert main([str(second), "-o", str(tmp_path / "." / "b.json")]) == 1
    assert "is one of the input reports" in capsys.readouterr().err
    assert second.read_bytes() == before


def test_output_to_a_directory_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = samples.flop_report().save(tmp_path / "flops.json")
    folder = tmp_path / "site"
    folder.mkdir()
    assert main([str(report), "-o", str(folder)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a directory" in err and "Traceback" not in err
    assert list(folder.iterdir()) == []


def test_output_to_an_unwritable_path_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = samples.flop_report().save(tmp_path / "flops.json")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    # root writes into a 0500 folder, but nobody creates files in /proc
    target = locked / "page.html" if os.geteuid() != 0 else Path("/proc/page.html")
    try:
        assert main([str(report), "-o", str(target)]) == 1
    finally:
        locked.chmod(0o700)
    err = capsys.readouterr().err
    assert err.startswith(f"render: error: cannot write {target}: ") and err.count("\n") == 1
    assert list(locked.iterdir()) == [] and not target.exists()


def test_output_under_a_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = samples.flop_report().save(tmp_path / "flops.json")
    assert main([str(report), "-o", str(report / "page.html")]) == 1
    err = capsys.readouterr().err
    assert err == f"render: error: cannot write {report / 'page.html'}: Not a directory\n"


def test_directory_as_input_report_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path), "-o", str(tmp_path / "page.html")]) == 1
    assert (
        capsys.readouterr().err == f"render: error: {tmp_path}: is a directory, not a report file\n"
    )
    assert list(tmp_path.iterdir()) == []
