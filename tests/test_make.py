"""The make entry points: install only when the dependency files changed; progress lines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL = ".ci/install .venv/bin/python"  # uv with pip's settings (.ci/install)
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def _scratch(tmp_path: Path) -> Path:
    for name in ("Makefile", "pyproject.toml", "constraints.txt", ".ci/heartbeat"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").write_text("")
    return tmp_path


def _alone() -> dict[str, str]:
    """This environment without the outer make's (`make check` runs the suite with its own
    flags and variables, e.g. HEARTBEAT_PREFIX): a make the test starts sees only its own."""
    outer = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "HEARTBEAT_PREFIX")
    return {k: v for k, v in os.environ.items() if k not in outer}


def _dry_run(folder: Path, target: str = "setup", *variables: str) -> str:
    done = subprocess.run(
        ["make", "-n", target, *variables],
        cwd=folder, capture_output=True, text=True, timeout=60, env=_alone(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_setup_installs_only_when_pyproject_or_constraints_changed(tmp_path: Path) -> None:
    folder = _scratch(tmp_path)
    stamp = folder / ".venv" / ".installed"
    assert INSTALL in _dry_run(folder)  # never installed: install
    stamp.write_text("")
    os.utime(folder / "pyproject.toml", (1_000, 1_000))  # older than the stamp
    os.utime(folder / "constraints.txt", (1_000, 1_000))
    os.utime(stamp, (2_000, 2_000))
    assert INSTALL not in _dry_run(folder)  # nothing changed: no install
    os.utime(folder / "constraints.txt", (3_000, 3_000))  # a new pin
    assert INSTALL in _dry_run(folder)


def test_main_installs_without_the_scale_extra_and_after_setup_installs_nothing(
    tmp_path: Path,
) -> None:
    folder = _scratch(tmp_path)
    plan = _dry_run(folder, "main")
    assert "-e '.[pipeline,hf,serve]'" in plan and "scale" not in plan  # no Ray for the main job
    assert "dvc repro" in plan
    for stamp in (".installed", ".installed-main"):  # what a full `make setup` leaves
        (folder / ".venv" / stamp).write_text("")
        os.utime(folder / ".venv" / stamp, (2_000, 2_000))
    os.utime(folder / "pyproject.toml", (1_000, 1_000))
    os.utime(folder / "constraints.txt", (1_000, 1_000))
    assert INSTALL not in _dry_run(folder, "main")


def test_heartbeat_passes_output_and_exit_status_through(tmp_path: Path) -> None:
    plain = {k: v for k, v in os.environ.items() if k != "HEARTBEAT_PREFIX"}  # make check sets it
    done = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "heartbeat"), "job", "sh", "-c", "echo hi; exit 3"],
        capture_output=True, text=True, timeout=60, check=False, env=plain,
    )  # fmt: skip
    assert done.returncode == 3
    lines = done.stdout.splitlines()
    assert lines[0] == "hi" and lines[-1].startswith("[job] done in ")
    assert lines[-1].endswith("(exit 3)")


def test_heartbeat_prefixes_each_line_when_jobs_run_side_by_side() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "heartbeat"), "job", "sh", "-c", "echo a; echo b"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "HEARTBEAT_PREFIX": "1"},
    )  # fmt: skip
    assert done.stdout.splitlines()[:2] == ["[job] a", "[job] b"]


def test_check_after_main_installs_no_ray_and_runs_both_tiers(tmp_path: Path) -> None:
    folder = _scratch(tmp_path)
    main_stamp = folder / ".venv" / ".installed-main"  # what `make main` leaves
    main_stamp.write_text("")
    os.utime(folder / "pyproject.toml", (1_000, 1_000))
    os.utime(folder / "constraints.txt", (1_000, 1_000))
    os.utime(main_stamp, (2_000, 2_000))
    plan = _dry_run(folder, "check")
    assert "-e '.[pipeline,dev,hf,quant,serve]'" in plan and "scale" not in plan  # no Ray
    assert '-m pytest -q -m "not slow"' in plan  # the fast tier
    assert '-m pytest -q -m "slow and not ray"' in plan  # the DVC end-to-end tier
    # two jobs side by side, lint first: lint, then the e2e tier beside fast tier and mypy
    assert "-j2 check-jobs" in plan and "HEARTBEAT_PREFIX=1" in plan
    assert plan.index("ruff check") < plan.index("slow and not ray") < plan.index("not slow")
    assert plan.index("not slow") < plan.index("-m mypy")
    serial = _dry_run(folder, "check", "CHECK_JOBS=1")
    assert "-j1 check-jobs" in serial
    # the e2e tier on 2 workers (E2E_XDIST), the fast tier in one process unless XDIST is given
    fast_line = next(line for line in plan.splitlines() if '-m "not slow"' in line)
    assert "-n " not in fast_line
    assert "--durations=10 -n 2 --dist loadfile --no-loadscope-reorder" in plan  # the e2e tier
    opted = _dry_run(folder, "check", "XDIST=-n 2 --dist loadfile", "E2E_XDIST=")
    assert opted.count("-n 2 --dist loadfile") == 1  # now on the fast tier only
    scale = _dry_run(folder, "check-scale")
    assert "scale]'" in scale and "-m pytest -q -m ray" in scale  # Ray only where it is used


def test_make_targets_write_bytecode_into_the_venv_even_where_the_host_forbids_it(
    tmp_path: Path,
) -> None:
    """With PYTHONDONTWRITEBYTECODE set (the CI host sets it), every process of the suite
    compiled what it imported from source again; make's recipes write bytecode under
    .venv/pycache instead, never beside the checkout's sources, and installs compile the
    packages' own into site-packages."""
    folder = _scratch(tmp_path)
    flags = "import sys; print(sys.flags.dont_write_bytecode, sys.pycache_prefix)"
    probe = f"probe:\n\t@python3 -c '{flags}'"
    done = subprocess.run(
        ["make", "-s", "--eval", probe, "probe"],
        cwd=folder, capture_output=True, text=True, timeout=60, check=False,
        env={**_alone(), "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", str(folder / ".venv" / "pycache")]
    # the installs run without the prefix: the packages' bytecode lands in site-packages
    assert "install env -u PYTHONPYCACHEPREFIX .venv/bin/python .ci/install" in _dry_run(folder)
