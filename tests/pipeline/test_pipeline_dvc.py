"""End-to-end: the DVC pipeline in a temporary copy of the working tree.

The copy holds what git would see (tracked and untracked, not ignored), is committed in a
fresh repository, and gets tiny timing settings so the whole file stays within minutes.
The tests run in file order and share that copy; each leaves it reproduced.
"""

from __future__ import annotations

import importlib.util
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from pipeline_children import dvc_env
from pipeline_repo import PipelineRepos

from torchscan_stages.report import FlopReport, load_report
from torchscan_stages.stages.render import ORDER as REPORTS

pytestmark = pytest.mark.slow

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


MEASUREMENTS = {"crawl", "flops", "memory", "latency", "rss", "profile", "compare", "predict"}
# Run on every `dvc repro` (always_changed), each rewriting its output only when it changed.
ALWAYS = {"env", "sources"}


def _sh(
    repo: Path,
    *cmd: str,
    env: dict[str, str] | None = None,
    check: bool = True,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        list(cmd), cwd=repo, env=env or dvc_env(), capture_output=True, text=True, timeout=timeout
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"{cmd} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


def _repro(repo: Path, env: dict[str, str] | None = None) -> set[str]:
    """Run `dvc repro`; the names of the stages that actually ran."""
    out = _sh(repo, "dvc", "repro", env=env).stdout
    return set(re.findall(r"Running stage '([^']+)'", out))


def _set_params(repo: Path, **dotted: object) -> None:
    path = repo / "params.yaml"
    params = yaml.safe_load(path.read_text(encoding="utf-8"))
    for key, value in dotted.items():
        node = params
        *parents, leaf = key.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")


def _commit(repo: Path, message: str) -> None:
    _sh(repo, "git", "add", "-A")
    _sh(repo, "git", "commit", "-qm", message)


TINY = {  # tiny timing so the file stays fast; the rss timeout stays generous (2-core CI)
    "latency": {"warmup": 0.0, "min_run_time": 0.05},
    "compare": {"warmup": 0.0, "min_run_time": 0.05},
    "profile": {"row_limit": 5},
}


def _shrink_conf(repo: Path) -> None:
    """Tiny timings in conf/config.yaml itself, so params.yaml stays its composition."""
    path = repo / "conf" / "config.yaml"
    conf = yaml.safe_load(path.read_text(encoding="utf-8"))
    for section, values in TINY.items():
        conf[section].update(values)
    path.write_text(yaml.safe_dump(conf, sort_keys=False), encoding="utf-8")
    _sh(repo, "python", "-m", "torchscan_stages.pipeline.compose")


def _no_warning(result: subprocess.CompletedProcess[str]) -> str:
    text = result.stdout + result.stderr
    assert result.returncode == 0, text
    assert not re.search(r"warning|error|failed", text, re.I), text
    return text


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, pipeline_repos: PipelineRepos) -> Path:
    target = pipeline_repos.committed_copy(tmp_path_factory.mktemp("pipeline") / "repo")
    _shrink_conf(target)
    _commit(target, "tiny timings")
    return target


def test_fresh_repro_runs_every_stage_and_reports_validate(repo: Path) -> None:
    ran = _repro(repo)
    assert ran == MEASUREMENTS | ALWAYS | {"render"}
    commit = _sh(repo, "git", "rev-parse", "HEAD").stdout.strip()
    env_hash = json.loads((repo / "reports" / "env.json").read_text())["env_hash"]
    for name in REPORTS:
        report = load_report(repo / "reports" / f"{name}.json")
        run = report.provenance.run
        assert run is not None, name
        assert report.provenance.env_hash == env_hash, name
        assert report.provenance.torch_version and report.provenance.package_version
        assert (run.model_name, run.model_revision) == ("cnn", "1"), name
        assert (run.input_name, run.input_revision, run.seed) == ("image", "1", 0), name
        assert run.git_commit == commit and run.git_dirty is not None, name
        assert "model" in run.config and "threads" in run.config, name
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


def test_second_repro_measures_nothing(repo: Path) -> None:
    assert _repro(repo) == ALWAYS  # they always run; their outputs are byte-identical


# `dvc status` always lists an always_changed stage, even when everything is up to date.
ENV_ONLY = "env:\n\talways changed\nsources:\n\talways changed\n"


def _readme_commit_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    marker = "test_commit_as_the_readme_says) -->\n```bash\n"
    return text[text.index(marker) + len(marker) :].split("```", 1)[0]


def test_commit_as_the_readme_says(repo: Path) -> None:
    _sh(repo, "bash", "-euo", "pipefail", "-c", _readme_commit_block())
    assert _sh(repo, "git", "status", "--porcelain").stdout == ""  # nothing left out
    tracked = _sh(repo, "git", "ls-files", "metrics", "plots", "dvc.lock").stdout.split()
    assert {"dvc.lock", "metrics/latency.json", "plots/latency_blocks.json"} <= set(tracked)
    status = _no_warning(_sh(repo, "dvc", "status", check=False))
    assert status == ENV_ONLY  # the side pipelines add no "deleted" lines
    shown = _no_warning(_sh(repo, "dvc", "metrics", "show", check=False))
    assert "metrics/latency.json" in shown and "pipelines/" not in shown
    _no_warning(_sh(repo, "dvc", "checkout", check=False))
    storage = repo.parent / "torchscan_stages-dvc-storage"  # the default remote, beside it
    assert any(storage.rglob("*")), "dvc push wrote nothing to the default remote"


def test_plots_show_draws_offline_in_chromium(repo: Path, tmp_path: Path) -> None:
    chromium = _chromium()
    if chromium.CHROMIUM is None:
        pytest.skip(chromium.SKIP_REASON)
    _no_warning(_sh(repo, "dvc", "plots", "show", "-o", str(tmp_path / "plots"), check=False))
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


def test_branch_on_an_hf_causal_lm_diffs_against_main(repo: Path) -> None:
    _sh(repo, "git", "checkout", "-q", "-b", "gpt2")
    compose = ("python", "-m", "torchscan_stages.pipeline.compose")
    _sh(repo, *compose, "--set-default", "model=gpt2", "input=hf_tokens")
    _sh(repo, *compose, "--check")  # the documented switch keeps the drift check green
    assert _repro(repo) == MEASUREMENTS | ALWAYS | {"render"}  # every default stage, on GPT-2
    for name in REPORTS:
        run = load_report(repo / "reports" / f"{name}.json").provenance.run
        assert run is not None and run.model_name == "gpt2-tiny", name
    _sh(repo, "git", "add", "conf/config.yaml")  # the owner's conf change, committed as code
    _sh(repo, "bash", "-euo", "pipefail", "-c", _readme_commit_block())
    _no_warning(_sh(repo, "dvc", "params", "diff", "main", check=False))
    params = json.loads(_sh(repo, "dvc", "params", "diff", "main", "--json").stdout)
    change = params["params.yaml"]["model.name"]
    assert (change["old"], change["new"]) == ("cnn", "gpt2-tiny")
    _no_warning(_sh(repo, "dvc", "metrics", "diff", "main", check=False))
    metrics = json.loads(_sh(repo, "dvc", "metrics", "diff", "main", "--json").stdout)
    parameters = metrics["metrics/crawl.json"]["parameters"]
    assert parameters["old"] != parameters["new"]  # a different model, a different count
    plots = repo.parent / "plots-diff"
    _no_warning(_sh(repo, "dvc", "plots", "diff", "main", "-o", str(plots), check=False))
    assert "cdn.jsdelivr" not in (plots / "index.html").read_text(encoding="utf-8")
    _sh(repo, "git", "checkout", "-q", "main")
    _no_warning(_sh(repo, "dvc", "checkout", check=False))
    run = load_report(repo / "reports" / "crawl.json").provenance.run
    assert run is not None and run.model_name == "cnn"  # main's reports are back
    assert _no_warning(_sh(repo, "dvc", "status", check=False)) == ENV_ONLY


def test_second_clone_pulls_from_the_default_remote_and_measures_nothing(repo: Path) -> None:
    clone = repo.parent / "clone"  # beside it: the default remote resolves to the same folder
    _sh(repo.parent, "git", "clone", "-q", str(repo), str(clone))
    _no_warning(_sh(clone, "dvc", "pull", check=False))
    assert (clone / "reports" / "latency.json").exists()
    assert _repro(clone) == ALWAYS  # nothing measured again
    assert _no_warning(_sh(clone, "dvc", "status", check=False)) == ENV_ONLY


def test_latency_setting_reruns_latency_and_dependents_only(repo: Path) -> None:
    before = _sh(repo, "git", "rev-parse", "HEAD").stdout.strip()
    _set_params(repo, **{"latency.min_run_time": 0.06})
    assert _repro(repo) == ALWAYS | {"latency", "render"}
    _commit(repo, "longer latency run")
    params = json.loads(_sh(repo, "dvc", "params", "diff", before, "HEAD", "--json").stdout)
    change = params["params.yaml"]["latency.min_run_time"]
    assert (change["old"], change["new"]) == (0.05, 0.06)
    metrics = json.loads(_sh(repo, "dvc", "metrics", "diff", before, "HEAD", "--json").stdout)
    changed = metrics["metrics/latency.json"]
    assert "warmed_median_s" in changed and "old" in changed["warmed_median_s"]
    assert not any(key.startswith("metrics/crawl") for key in metrics)  # crawl did not rerun


def test_model_revision_bump_reruns_model_dependent_stages(repo: Path) -> None:
    _set_params(repo, **{"model.revision": "2"})
    assert _repro(repo) == ALWAYS | {"render"} | MEASUREMENTS
    assert load_report(repo / "reports" / "flops.json").provenance.run.model_revision == "2"  # type: ignore[union-attr]
    _commit(repo, "model revision 2")


USER_MODEL = """
import torch
from torch import nn


def build(seed: int = 0, width: int = 8) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, 4))


def example_batch(batch_size: int = 4, seed: int = 0) -> tuple[torch.Tensor]:
    return (torch.randn(batch_size, 16, generator=torch.Generator().manual_seed(seed)),)
"""
USER_CONF = {
    "model": "_target_: my_models.net.build\nname: mine\nrevision: '1'\n"
    "kwargs:\n  seed: ${seed}\n  width: 8\n",
    "input": "_target_: my_models.net.example_batch\nname: mine\nrevision: '1'\n"
    "kwargs:\n  batch_size: 4\n  seed: ${seed}\nwork_units: 4\nunit: samples\n",
}


def test_editing_the_users_model_file_reruns_exactly_the_model_stages(repo: Path) -> None:
    """The user's package (my_models/, not torchscan_stages/) is a dependency of its stages."""
    _sh(repo, "git", "checkout", "-q", "-b", "mine")
    package = repo / "my_models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "net.py").write_text(USER_MODEL)
    for group, text in USER_CONF.items():
        (repo / "conf" / group / "mine.yaml").write_text(text)
    compose = ("python", "-m", "torchscan_stages.pipeline.compose")
    _sh(repo, *compose, "--set-default", "model=mine", "input=mine")
    assert _repro(repo) == MEASUREMENTS | ALWAYS | {"render"}
    sources = json.loads((repo / "reports" / "sources.json").read_text())
    assert sources["model"]["package"] == "my_models" and sources["model"]["files"] == 2
    before = json.loads((repo / "metrics" / "crawl.json").read_text())["parameters"]
    # Linear(16, 8) + Linear(8, 4): 16*8+8 + 8*4+4 = 136 + 36 = 172 parameters
    assert before == 172
    _commit(repo, "my own model")
    assert _repro(repo) == ALWAYS  # nothing changed: nothing measured
    # the owner edits the model file (no revision bump): every stage that builds it reruns,
    # render follows its reports, and nothing else (env, sources always run, cheaply)
    (package / "net.py").write_text(
        USER_MODEL.replace("nn.ReLU(),", "nn.ReLU(), nn.Linear(width, width),")
    )
    assert _repro(repo) == MEASUREMENTS | ALWAYS | {"render"}
    after = json.loads((repo / "metrics" / "crawl.json").read_text())["parameters"]
    assert after == 172 + 8 * 8 + 8  # one more Linear(8, 8): 64 weights + 8 biases
    (repo / "NOTES.md").write_text("a file outside the model's package\n")
    assert _repro(repo) == ALWAYS
    _commit(repo, "deeper model")
    _sh(repo, "git", "checkout", "-q", "main")
    _no_warning(_sh(repo, "dvc", "checkout", check=False))
    assert _no_warning(_sh(repo, "dvc", "status", check=False)) == ENV_ONLY


def test_changed_environment_reruns_every_measurement(repo: Path, tmp_path: Path) -> None:
    # Simulate a torch upgrade: distribution metadata earlier on the path than the real one.
    fake = tmp_path / "fake-site"
    meta = fake / "torch-99.0.0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 99.0.0\n")
    env = dvc_env(extra_path=fake)
    assert _repro(repo, env=env) == ALWAYS | {"render"} | MEASUREMENTS
    report = load_report(repo / "reports" / "memory.json")
    assert report.provenance.torch_version == "99.0.0"
    assert _repro(repo, env=env) == ALWAYS


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
    _set_params(repo, **edit)
    try:
        env = {**dvc_env(), "DVC_STAGE": stage}
        direct = _sh(repo, "python", "-m", f"torchscan_stages.stages.{stage}", env=env, check=False)
        assert direct.returncode == 2
        assert direct.stderr.count("\n") == 1 and expected in direct.stderr, direct.stderr
        assert direct.stderr.startswith(f"{stage}: ")
        via_dvc = _sh(repo, "dvc", "repro", "-s", stage, check=False)
        assert via_dvc.returncode != 0 and expected in via_dvc.stderr + via_dvc.stdout
        assert _snapshot(repo) == before  # persist + atomic writes: last good outputs stay
    finally:
        (repo / "params.yaml").write_text(original)


def test_sigkill_mid_stage_never_leaves_a_truncated_report(repo: Path) -> None:
    original = (repo / "params.yaml").read_text()
    good = (repo / "reports" / "latency.json").read_bytes()
    _set_params(repo, **{"latency.min_run_time": 30.0, "latency.max_run_time": 30.0})
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


def test_check_one_optimisation_pipeline(repo: Path) -> None:
    ran = _repro(repo / "pipelines" / "check_optimisation")
    assert {"compare", "render"} <= {name.rsplit(":", 1)[-1] for name in ran}
    folder = repo / "pipelines" / "check_optimisation"
    comparison = load_report(folder / "reports" / "compare.json")
    assert comparison.kind == "benchmark_comparison"
    assert comparison.candidate_name is not None and "channels_last" in comparison.candidate_name
    assert comparison.check.performed and comparison.check.tolerance == {
        "rtol": 1.0e-4,
        "atol": 1.0e-5,
    }
    assert (folder / "reports" / "index.html").exists()


def test_experiment_queue_runs_a_threads_grid(repo: Path) -> None:
    """`dvc exp run --queue -S threads=1,2` queues one experiment per value (Hydra syntax)."""
    # DVC recomposes params.yaml from conf/ for experiments: shrink the timing again here
    tiny = ["latency.warmup=0", "latency.min_run_time=0.05", "compare.warmup=0"]
    tiny += ["compare.min_run_time=0.05", "profile.row_limit=5"]
    overrides = [arg for item in ["threads=1,2", *tiny] for arg in ("-S", item)]
    queued = _sh(repo, "dvc", "exp", "run", "--queue", *overrides).stdout
    assert queued.count("Queued experiment") == 2, queued
    _sh(repo, "dvc", "queue", "start", "-j", "1")
    deadline = time.monotonic() + 480
    status = ""
    while time.monotonic() < deadline:
        status = _sh(repo, "dvc", "queue", "status").stdout
        if not re.search(r"\b(Queued|Running)\b", status):
            break
        time.sleep(3)
    assert status.count("Success") == 2, status
    for task in re.findall(r"^(\w+)\s.*\bSuccess\b", status, re.M):
        log = _sh(repo, "dvc", "queue", "logs", task).stdout
        # the side pipelines are projects of their own: no missing-hash noise in the queue
        assert "No file hash info" not in log and "WARNING" not in log, log
    table = json.loads(_sh(repo, "dvc", "exp", "show", "--json").stdout)
    threads = set()
    for commit in table:
        for experiment in commit.get("experiments") or []:
            for revision in experiment.get("revs") or []:
                data = revision.get("data") or {}
                params = (data.get("params") or {}).get("params.yaml", {}).get("data", {})
                metrics = (data.get("metrics") or {}).get("metrics/latency.json", {}).get("data")
                if "threads" in params and metrics:
                    threads.add(params["threads"])
                    assert metrics["warmed_median_s"] > 0
    assert threads == {1, 2}
