"""End-to-end: the DVC pipeline in a temporary copy of the working tree.

The copy holds what git would see (tracked and untracked, not ignored), is committed in a
fresh repository with tiny timing settings, and has had one full `dvc repro`
(``PipelineRepos.reproduced_copy``: one full run per test process, shared with the other
end-to-end modules). The tests run in file order and share this module's copy; each
leaves it reproduced. Where a test asks which stages a change reruns, a stage whose own
params or dependency files changed is read from `dvc status` (DVC's rerun decision); the
stages a test really reruns are the ones whose outputs it then reads.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from pipeline_checks import (
    ALWAYS,
    ENV_ONLY,
    MEASUREMENTS,
    TIMED,
    changed_stages,
    commit,
    commit_as_the_readme_says,
    no_warning,
    set_params,
)
from pipeline_children import dvc_env
from pipeline_repo import PipelineRepos, Reproduced, repro, run
from written_files import json_files

from torchscan_stages.report import FlopReport, ServedReport, load_report
from torchscan_stages.serve.metrics import served_metrics
from torchscan_stages.stages.render import ORDER as REPORTS

# A bound on a hang, not a timing claim: each test's `dvc repro` runs (and the first test's
# share of the reproduced template's full run) took up to 7.5 min at a load average of 8 on
# 2 cores (2026-12-01), over pytest's 600 s default; each child command keeps its own limit.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]


def _by_path(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def _chromium() -> ModuleType:
    """tests/render/chromium.py: the offline headless Chromium the HTML tests use."""
    return _by_path("_render_chromium", ROOT / "tests" / "render" / "chromium.py")


@pytest.fixture(scope="module")
def reproduced(
    tmp_path_factory: pytest.TempPathFactory, pipeline_repos: PipelineRepos
) -> Reproduced:
    return pipeline_repos.reproduced_copy(tmp_path_factory.mktemp("pipeline") / "repo")


@pytest.fixture(scope="module")
def repo(reproduced: Reproduced) -> Path:
    return reproduced.path


def test_fresh_repro_runs_every_stage_and_reports_validate(reproduced: Reproduced) -> None:
    repo = reproduced.path
    assert reproduced.first_run == MEASUREMENTS | ALWAYS | {"render"}
    commit_sha = run(repo, "git", "rev-parse", "HEAD").stdout.strip()
    env_hash = load_report(repo / "reports" / "env.json").provenance.env_hash
    for name in REPORTS:
        report = load_report(repo / "reports" / f"{name}.json")
        provenance_run = report.provenance.run
        assert provenance_run is not None, name
        assert report.provenance.env_hash == env_hash, name
        assert report.provenance.torch_version and report.provenance.package_version
        assert (provenance_run.model_name, provenance_run.model_revision) == ("cnn", "1"), name
        assert (provenance_run.input_name, provenance_run.input_revision) == ("image", "1")
        assert provenance_run.seed == 0, name
        assert provenance_run.git_commit == commit_sha, name
        assert provenance_run.git_dirty is not None, name
        assert "model" in provenance_run.config, name
        # threads: read (and recorded) by the stages that time only
        timed = name in TIMED or name == "compare_diff"
        assert ("threads" in provenance_run.config) == timed, name
    latency = load_report(repo / "reports" / "latency.json")
    assert set(latency.provenance.run.config) == {  # type: ignore[union-attr]
        "model",
        "input",
        "device",
        "precision",
        "threads",
        "seed",
        "latency",
        "budgets",
    }
    metrics = json.loads((repo / "metrics" / "latency.json").read_text())
    assert metrics["warmed_median_s"] > 0 and metrics["throughput_per_s"] > 0
    # throughput = work_units / median = 8 samples / median
    assert metrics["throughput_per_s"] == pytest.approx(8 / metrics["warmed_median_s"])
    flops = load_report(repo / "reports" / "flops.json")
    assert isinstance(flops, FlopReport) and flops.product_flops is not None
    flop_metrics = json.loads((repo / "metrics" / "flops.json").read_text())
    # complete values only, copied from the report: the tensor-product share <= the total
    assert flop_metrics == {
        "total_flops": flops.total.value,
        "product_flops": flops.product_flops.value,
    }
    assert 0 < flop_metrics["product_flops"] < flop_metrics["total_flops"]
    assert (repo / "reports" / "index.html").read_text().startswith("<!DOCTYPE html>")
    # every JSON output dvc.lock records loads as a report kind, but DVC's own flat formats
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    outs = {repo / o["path"] for stage in lock["stages"].values() for o in stage.get("outs", [])}
    kinds = {load_report(path).kind for path, skip in json_files(repo, outs) if not skip}
    skipped = {path.parent.name for path, skip in json_files(repo, outs) if skip}
    assert {"environment", "sources", "metrics_evidence", "analysis", "benchmark"} <= kinds
    assert skipped == {"metrics", "plots"}


def test_second_repro_measures_nothing(repo: Path) -> None:
    assert repro(repo) == ALWAYS  # they always run; their outputs are byte-identical


def test_commit_as_the_readme_says(repo: Path) -> None:
    commit_as_the_readme_says(repo)
    assert run(repo, "git", "status", "--porcelain").stdout == ""  # nothing left out
    tracked = run(repo, "git", "ls-files", "metrics", "plots", "dvc.lock").stdout.split()
    assert {"dvc.lock", "metrics/latency.json", "plots/latency_blocks.json"} <= set(tracked)
    status = no_warning(run(repo, "dvc", "status", check=False))
    assert status == ENV_ONLY  # the side pipelines add no "deleted" lines
    shown = no_warning(run(repo, "dvc", "metrics", "show", check=False))
    assert "metrics/latency.json" in shown and "pipelines/" not in shown
    no_warning(run(repo, "dvc", "checkout", check=False))
    storage = repo.parent / "torchscan_stages-dvc-storage"  # the default remote, beside it
    assert any(storage.rglob("*")), "dvc push wrote nothing to the default remote"


def test_plots_show_draws_offline_in_chromium(repo: Path, tmp_path: Path) -> None:
    chromium = _chromium()
    if chromium.CHROMIUM is None:
        pytest.skip(chromium.SKIP_REASON)
    no_warning(run(repo, "dvc", "plots", "show", "-o", str(tmp_path / "plots"), check=False))
    page = tmp_path / "plots" / "index.html"
    html = page.read_text(encoding="utf-8")
    assert "cdn.jsdelivr" not in html and "<script src" not in html  # vega is inlined
    netlog = tmp_path / "netlog.json"
    done = subprocess.run(
        [
            chromium.CHROMIUM, *chromium.FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
            f"--log-net-log={netlog}", "--virtual-time-budget=15000", "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert chromium.page_requests(chromium._net_events(netlog)) == []  # no network request
    # vega-embed replaces each plot's div content with a drawn chart: 2 declared plots
    assert done.stdout.count('class="vega-embed') == 2, done.stdout[-3000:]
    assert done.stdout.count("<canvas") + done.stdout.count('class="marks"') >= 2


def test_second_clone_pulls_from_the_default_remote_and_measures_nothing(repo: Path) -> None:
    clone = repo.parent / "clone"  # beside it: the default remote resolves to the same folder
    run(repo.parent, "git", "clone", "-q", str(repo), str(clone))
    no_warning(run(clone, "dvc", "pull", check=False))
    assert (clone / "reports" / "latency.json").exists()
    assert repro(clone) == ALWAYS  # nothing measured again
    assert no_warning(run(clone, "dvc", "status", check=False)) == ENV_ONLY


def test_latency_setting_reruns_latency_and_dependents_only(repo: Path) -> None:
    before = run(repo, "git", "rev-parse", "HEAD").stdout.strip()
    set_params(repo, **{"latency.min_run_time": 0.06, "serve.duration_s": 0.12})
    assert changed_stages(repo) == ALWAYS | {"latency", "serve"}  # DVC's rerun decision
    # `dvc repro serve` after `dvc repro`: the serve stage alone is measured
    assert repro(repo, "serve") == ALWAYS | {"serve"}
    served = load_report(repo / "reports" / "serve.json")
    assert isinstance(served, ServedReport) and served.options["duration_s"] == 0.12
    assert served.provenance.run is not None and "serve" in served.provenance.run.config
    metrics = json.loads((repo / "metrics" / "serve.json").read_text())
    expected = {k: v for k, v in served_metrics(served).items() if v is not None}
    assert metrics == expected and "achieved_per_s" in metrics  # complete values, copied
    assert repro(repo) == ALWAYS | {"latency", "render"}
    commit(repo, "longer latency run")
    params = json.loads(run(repo, "dvc", "params", "diff", before, "HEAD", "--json").stdout)
    change = params["params.yaml"]["latency.min_run_time"]
    assert (change["old"], change["new"]) == (0.05, 0.06)
    metrics = json.loads(run(repo, "dvc", "metrics", "diff", before, "HEAD", "--json").stdout)
    changed = metrics["metrics/latency.json"]
    assert "warmed_median_s" in changed and "old" in changed["warmed_median_s"]
    assert not any(key.startswith("metrics/crawl") for key in metrics)  # crawl did not rerun


def test_model_revision_bump_reruns_model_dependent_stages(repo: Path) -> None:
    original = (repo / "params.yaml").read_text()
    set_params(repo, threads=2)  # how fast, not what is counted: only the timing stages
    assert changed_stages(repo) == ALWAYS | TIMED
    (repo / "params.yaml").write_text(original)
    set_params(repo, **{"model.revision": "2"})
    try:
        # every stage that builds the model has `model` among its params: all would rerun
        assert changed_stages(repo) == ALWAYS | MEASUREMENTS
        assert repro(repo, "flops") == ALWAYS | {"flops"}  # one of them, really rerun
        run_info = load_report(repo / "reports" / "flops.json").provenance.run
        assert run_info is not None and run_info.model_revision == "2"
    finally:
        (repo / "params.yaml").write_text(original)
    # revision 1 again: flops is measured again, the page follows, nothing else moves
    assert repro(repo) == ALWAYS | {"flops", "render"}


def test_changed_environment_reruns_every_measurement(repo: Path, tmp_path: Path) -> None:
    # Simulate a torch upgrade: distribution metadata earlier on the path than the real one.
    fake = tmp_path / "fake-site"
    meta = fake / "torch-99.0.0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 99.0.0\n")
    env = dvc_env(extra_path=fake)
    assert repro(repo, "env", env=env) == {"env"}  # a new environment fingerprint
    assert changed_stages(repo) == ALWAYS | MEASUREMENTS  # every measurement depends on it
    assert repro(repo, "crawl", env=env) == ALWAYS | {"crawl"}
    report = load_report(repo / "reports" / "crawl.json")
    assert report.provenance.torch_version == "99.0.0"
    assert repro(repo, "crawl", env=env) == ALWAYS  # the same environment: nothing again
    # the real torch again: only the stage measured under the fake one reruns (and the page)
    assert repro(repo) == ALWAYS | {"crawl", "render"}
    assert load_report(repo / "reports" / "crawl.json").provenance.torch_version != "99.0.0"


def _snapshot(repo: Path) -> dict[str, bytes]:
    files = [*(repo / "reports").glob("*.json"), *(repo / "metrics").glob("*.json")]
    return {p.name + p.parent.name: p.read_bytes() for p in files}


@pytest.mark.parametrize(
    ("stage", "edit", "expected"),
    [
        ("compare", {"candidate.tolerance.rtol": "???"}, "candidate.tolerance.rtol is required"),
        ("latency", {"model._target_": "torchscan_stages.zoo.nope"}, "model._target_ = "),
        ("memory", {"device.type": "cuda"}, "device.type = 'cuda'"),
        ("latency", {"latency.min_run_time": "long"}, "latency.min_run_time = 'long'"),
    ],
)
def test_bad_config_fails_with_one_line_and_keeps_outputs(
    repo: Path, stage: str, edit: dict[str, object], expected: str
) -> None:
    if stage == "memory":
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is present: device=cuda is valid here")
    before = _snapshot(repo)
    original = (repo / "params.yaml").read_text()
    set_params(repo, **edit)
    try:
        env = {**dvc_env(), "DVC_STAGE": stage}
        direct = run(repo, "python", "-m", f"torchscan_stages.stages.{stage}", env=env, check=False)
        assert direct.returncode == 2
        assert direct.stderr.count("\n") == 1 and expected in direct.stderr, direct.stderr
        assert direct.stderr.startswith(f"{stage}: ")
        via_dvc = run(repo, "dvc", "repro", "-s", stage, check=False)
        assert via_dvc.returncode != 0 and expected in via_dvc.stderr + via_dvc.stdout
        assert _snapshot(repo) == before  # persist + atomic writes: last good outputs stay
    finally:
        (repo / "params.yaml").write_text(original)


def test_sigkill_mid_stage_never_leaves_a_truncated_report(repo: Path) -> None:
    original = (repo / "params.yaml").read_text()
    good = (repo / "reports" / "latency.json").read_bytes()
    set_params(repo, **{"latency.min_run_time": 30.0, "latency.max_run_time": 30.0})
    try:
        env = {**dvc_env(), "DVC_STAGE": "latency"}
        process = subprocess.Popen(
            ["python", "-m", "torchscan_stages.stages.latency"],
            cwd=repo,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(6)  # torch imported, measuring
        assert process.poll() is None
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        (repo / "params.yaml").write_text(original)
    assert (repo / "reports" / "latency.json").read_bytes() == good
    load_report(repo / "reports" / "latency.json")
