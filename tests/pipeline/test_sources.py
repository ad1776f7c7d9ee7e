"""The user's model code as a dependency: reports/sources.json (pipeline/sources.py)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from torchscan_stages.pipeline.sources import fingerprint, module_name, sources_document

ROOT = Path(__file__).resolve().parents[2]


def _package(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = root / "user_pkg_src"
    (package / "blocks").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "net.py").write_text("def build():\n    return None\n")
    (package / "blocks" / "conv.py").write_text("WIDTH = 8\n")
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    return package


def test_module_name_takes_both_spellings() -> None:
    assert module_name("mypkg.models.build") == "mypkg.models"
    assert module_name("mypkg.models:Net.build") == "mypkg.models"


def test_an_edit_anywhere_in_the_users_package_changes_its_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _package(tmp_path, monkeypatch)
    first = fingerprint("user_pkg_src.net.build")
    assert (first["package"], first["files"]) == ("user_pkg_src", 3)  # __init__, net, conv
    assert "user_pkg_src" not in sys.modules  # found without importing it
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "net.cpython-311.pyc").write_bytes(b"bytecode")
    assert fingerprint("user_pkg_src.net.build") == first  # bytecode is not source
    (package / "blocks" / "conv.py").write_text("WIDTH = 16\n")  # a module the model imports
    assert fingerprint("user_pkg_src.net.build")["sha256"] != first["sha256"]


def test_the_hash_does_not_depend_on_where_the_clone_lives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _package(tmp_path / "a", monkeypatch)
    here = fingerprint("user_pkg_src.net.build")
    monkeypatch.syspath_prepend(str(tmp_path / "b"))
    _package(tmp_path / "b", monkeypatch)
    there = fingerprint("user_pkg_src.net.build")
    assert here == there and str(tmp_path) not in json.dumps(here)


def test_single_file_module_installed_code_and_a_missing_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "user_single_mod.py").write_text("def build():\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert fingerprint("user_single_mod.build")["files"] == 1
    for installed in ("torch.nn.Identity", "json.dumps"):  # site-packages, the stdlib
        entry = fingerprint(installed)
        assert "sha256" not in entry and entry["source"].startswith("installed"), entry
    assert fingerprint("no_such_pkg_xyz.build")["source"].startswith("not found")


def test_the_default_config_hashes_the_zoo_package() -> None:
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    document = sources_document(params)
    assert set(document) == {"model", "input"}
    assert document["model"]["target"] == "torchscan_stages.zoo.small_resnet"
    assert document["model"]["package"] == "torchscan_stages" and "sha256" in document["model"]


def test_the_stage_is_cheap_and_rewrites_nothing_when_nothing_changed(tmp_path: Path) -> None:
    output = tmp_path / "sources.json"
    code = (
        "import sys\n"
        "from torchscan_stages.stages.sources import main\n"
        f"assert main(['--params', {str(ROOT / 'params.yaml')!r}, {str(output)!r}]) == 0\n"
        "heavy = sorted({'torch', 'hydra', 'dvc'} & set(sys.modules))\n"
        "assert not heavy, heavy\n"
    )
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "sources: model torchscan_stages" in done.stdout
    written = output.stat().st_mtime_ns
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=120)
    assert output.stat().st_mtime_ns == written  # byte-identical: not rewritten


def test_every_stage_that_builds_the_model_depends_on_its_source() -> None:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    assert stages["sources"]["always_changed"] is True
    for name, stage in stages.items():
        if "model" in stage.get("params", []):
            assert "reports/sources.json" in stage["deps"], name
    assert "reports/sources.json" not in stages["env"]["deps"]
