"""Every JSON file the package writes loads through ``load_report`` into a typed kind.

The pipeline's own writers run here on tiny inputs, as DVC starts them (``DVC_STAGE`` set,
``params.yaml`` in the working folder): the ``env`` and ``sources`` fingerprints, the crawl,
memory and latency stages (reports, flat metrics, their evidence, plots data), a sweep job's
status and the sweep summary over that job. Every JSON file left in the folder is then a
report, or one of the formats others fix that docs/reports.md lists ("Files that are not
reports"); the end-to-end tier checks a reproduced DVC pipeline's outputs the same way
(tests/pipeline/test_pipeline_dvc.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from written_files import json_files

from torchscan_stages.pipeline.job_status import write_job_status
from torchscan_stages.pipeline.runner import run_stage
from torchscan_stages.pipeline.sweep import summarize_jobs
from torchscan_stages.report import BenchmarkReport, load_report
from torchscan_stages.report.fingerprint import EnvironmentReport, SourcesReport
from torchscan_stages.stages import crawl, latency, memory
from torchscan_stages.stages import env as env_stage
from torchscan_stages.stages import sources as sources_stage

ROOT = Path(__file__).resolve().parents[2]


def _params(project: Path) -> dict[str, Any]:
    """The project's params with a tiny timing (its figures are never asserted here)."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["latency"].update(warmup=0.0, min_run_time=0.05, max_run_time=0.3)
    params["threads"] = 2
    params["crawl"]["mode"] = "structure"  # no operator pass: what is written is the same kind
    params["model"]["kwargs"]["width"] = 4
    params["input"]["kwargs"].update(height=8, width=8)
    (project / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    return params


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A project folder after the writers ran, and its params."""
    root = tmp_path_factory.mktemp("written")
    project = root / "project"
    project.mkdir()
    params = _params(project)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project)
        patch.setenv("TORCHSCAN_TIMING_LOCK", "off")  # no wait on other checkouts' timings
        assert env_stage.main([]) == 0
        assert sources_stage.main([]) == 0
        for stage in (crawl, memory, latency):
            name = stage.__name__.rsplit(".", 1)[1]
            patch.setenv("DVC_STAGE", name)
            assert run_stage(name, stage.KEYS, stage.run, argv=[], writes=stage.WRITES) == 0
    write_job_status(project, "completed", None)
    summarize_jobs([project], root, title="one job", listed=True)
    return root, params


def test_every_json_file_the_writers_leave_is_a_report_or_a_documented_format(
    written: tuple[Path, dict[str, Any]],
) -> None:
    root, _ = written
    kinds: dict[str, str] = {}
    exempt: list[str] = []
    for path, documented in json_files(root):
        relative = path.relative_to(root).as_posix()
        if documented:
            exempt.append(relative)
        else:
            kinds[relative] = load_report(path).kind  # a ValueError here names the file
    assert kinds == {
        "project/job_status.json": "job_status",
        "project/metrics/crawl.evidence.json": "metrics_evidence",
        "project/metrics/latency.evidence.json": "metrics_evidence",
        "project/metrics/memory.evidence.json": "metrics_evidence",
        "project/reports/crawl.json": "analysis",
        "project/reports/env.json": "environment",
        "project/reports/latency.json": "benchmark",
        "project/reports/memory.json": "benchmark",
        "project/reports/sources.json": "sources",
        "sweep_summary.json": "sweep_summary",
    }
    # only DVC's flat formats are left out: metrics files and plots data
    assert exempt == [
        "project/metrics/crawl.json",
        "project/metrics/latency.json",
        "project/metrics/memory.json",
        "project/plots/latency_blocks.json",
        "project/plots/layer_flops.json",
    ]


def test_execution_records_carry_what_the_pipeline_configured(
    written: tuple[Path, dict[str, Any]],
) -> None:
    root, params = written
    timed = load_report(root / "project" / "reports" / "latency.json")
    counted = load_report(root / "project" / "reports" / "memory.json")
    assert isinstance(timed, BenchmarkReport) and isinstance(counted, BenchmarkReport)
    precision = params["precision"]
    label = f"{precision['name']} ({precision['dtype']}, {precision['apply']})"
    for report in (timed, counted):
        assert report.execution.precision == label
        assert report.execution.input_name == params["input"]["name"] == "image"
        # the input's work per call, also on the memory report (which measures one call)
        assert (report.work_units, report.unit) == (8, "samples")  # batch_size 8
    assert timed.execution.threads == 2  # the timed stage applies the configured threads
    assert counted.execution.threads is None  # the memory stage never sets threads
    summary = load_report(root / "sweep_summary.json")
    assert summary.kind == "sweep_summary"
    (job,) = summary.jobs  # type: ignore[union-attr]
    assert job.status == "completed" and job.threads == 2
    # the flat metrics columns DVC plots read: the latency file's keys, prefixed
    assert isinstance(job.model_dump()["latency_warmed_median_s"], float)


def _user_package(folder: Path) -> dict[str, Any]:
    """A user's model package in ``folder`` and params naming it."""
    package = folder / "my_net"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "net.py").write_text("def build():\n    return None\n")
    params = {"model": {"_target_": "my_net.net.build"}, "input": {"_target_": "json.loads"}}
    (folder / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    return params


def test_the_fingerprints_stay_byte_identical_until_what_they_describe_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _user_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    env, sources = tmp_path / "reports" / "env.json", tmp_path / "reports" / "sources.json"
    assert env_stage.main([]) == 0 and sources_stage.main([]) == 0
    first = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in (env, sources)}
    assert env_stage.main([]) == 0 and sources_stage.main([]) == 0
    for path, (data, stamp) in first.items():
        assert path.read_bytes() == data and path.stat().st_mtime_ns == stamp  # not rewritten
    environment, hashed = load_report(env), load_report(sources)
    assert isinstance(environment, EnvironmentReport) and isinstance(hashed, SourcesReport)
    assert environment.provenance.run is None and hashed.provenance.run is None  # no commit
    assert hashed.sources["model"].files == 2  # my_net/__init__.py and my_net/net.py
    assert hashed.sources["input"].sha256 is None  # the standard library: not hashed
    (tmp_path / "my_net" / "net.py").write_text("def build():\n    return 1\n")
    assert sources_stage.main([]) == 0
    assert sources.read_bytes() != first[sources][0]  # the model's source changed
    assert env.read_bytes() == first[env][0]  # the environment did not


def test_a_fingerprint_with_a_run_is_refused(tmp_path: Path) -> None:
    from torchscan_stages.provenance import build_provenance
    from torchscan_stages.report import RunContext

    provenance = build_provenance(
        RunContext(stage="env", git_commit="0" * 40), include_runtime=False
    )
    with pytest.raises(ValueError, match="a fingerprint records the environment only"):
        EnvironmentReport(provenance=provenance)
    document = env_stage.environment_text().replace(
        '"provenance": {', '"provenance": {"run":{"git_commit":"' + "0" * 40 + '"},', 1
    )
    path = tmp_path / "env.json"
    path.write_text(document)
    with pytest.raises(ValueError) as caught:
        load_report(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: invalid environment report")
    assert "provenance.run: a fingerprint records the environment only" in message
