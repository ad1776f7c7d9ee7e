"""The user's model code as a dependency: reports/sources.json (pipeline/sources.py)."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

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


def _fingerprint_within(target: str, fifo: Path, seconds: float = 30) -> dict[str, Any]:
    """``fingerprint(target)`` in a thread; if it blocks (opened the FIFO), release the reader
    by opening the FIFO's write end, and fail."""
    found: list[dict[str, Any]] = []
    worker = threading.Thread(target=lambda: found.append(fingerprint(target)), daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # unblock the stuck open
        pytest.fail(f"fingerprint({target!r}) blocked: it opened the FIFO {fifo.name}")
    return found[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and sockets: POSIX")
def test_the_walk_reads_regular_files_only_and_says_what_it_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _package(tmp_path, monkeypatch)
    os.symlink("user@host.1234:1700000000", package / ".#net.py")  # Emacs' lock: dangling
    (package / "data.py").mkdir()  # a folder named *.py
    (package / "data.py" / "inner.py").write_text("X = 1\n")
    os.mkfifo(package / "pipe.py")  # opening it for reading would wait for a writer forever
    server = socket.socket(socket.AF_UNIX)
    with contextlib.chdir(package):  # a short relative name: AF_UNIX paths are capped at ~108
        server.bind("sock.py")
    entry = _fingerprint_within("user_pkg_src.net.build", package / "pipe.py")
    server.close()
    # the three regular files of _package, by their names in the package, and nothing else
    assert entry["files"] == 3
    assert entry["hashed"] == ["user_pkg_src/__init__.py", "user_pkg_src/blocks/conv.py",
                               "user_pkg_src/net.py"]  # fmt: skip
    notes = "\n".join(entry["skipped"])
    assert "user_pkg_src/.#net.py: a dangling link" in notes
    assert "user_pkg_src/data.py: a folder named *.py" in notes
    assert "user_pkg_src/pipe.py: not a regular file (a FIFO)" in notes
    assert "user_pkg_src/sock.py: not a regular file (a socket)" in notes
    assert len(entry["skipped"]) == 4 and str(tmp_path) not in json.dumps(entry)


def test_a_symlinked_sub_package_is_hashed_once_and_its_edits_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _package(tmp_path / "clone", monkeypatch)
    shared = tmp_path / "elsewhere" / "layers"  # a sub-package kept outside, linked in
    shared.mkdir(parents=True)
    (shared / "attention.py").write_text("HEADS = 4\n")
    os.symlink(shared, package / "layers")
    os.symlink(shared, package / "layers_again")  # a second link to the same folder
    os.symlink("..", package / "blocks" / "up")  # a loop back to the package
    first = fingerprint("user_pkg_src.net.build")
    # __init__, blocks/conv, net and the linked layers/attention: 4 files, each once, named as
    # the package shows them (no absolute path: two clones hash alike)
    assert first["hashed"] == [
        "user_pkg_src/__init__.py",
        "user_pkg_src/blocks/conv.py",
        "user_pkg_src/layers/attention.py",
        "user_pkg_src/net.py",
    ]
    assert first["skipped"] == [
        "user_pkg_src/blocks/up: a link to a folder already walked (not hashed twice)",
        "user_pkg_src/layers_again: a link to a folder already walked (not hashed twice)",
    ]
    (shared / "attention.py").write_text("HEADS = 8\n")  # the edit that must rerun the stages
    assert fingerprint("user_pkg_src.net.build")["sha256"] != first["sha256"]
