"""`.ci/install` (every make install): uv with pip's own settings, pip where uv is missing."""

from __future__ import annotations

import importlib.util
import stat
import sys
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _install() -> ModuleType:
    loader = SourceFileLoader("ci_install", str(ROOT / ".ci" / "install"))
    spec = importlib.util.spec_from_loader("ci_install", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _fake_python(folder: Path, log: Path) -> Path:
    """A 'python' that records each call's arguments (one line) and succeeds."""
    python = folder / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return python


def test_uv_gets_pips_find_links_indexes_constraints_and_cert(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install = _install()
    monkeypatch.setenv("PIP_FIND_LINKS", "/wheels")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "file:///a/simple file:///b/simple")
    monkeypatch.setenv("PIP_CONSTRAINT", "/etc/pins.txt")
    monkeypatch.setenv("PIP_CERT", "/certs.pem")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    python = sys.executable
    command, env = install.uv_command(tmp_path / "uv", python, ["-c", "constraints.txt", "x"])
    joined = " ".join(command)
    assert command[:5] == [str(tmp_path / "uv"), "pip", "install", "--python", python]
    assert "--index-strategy unsafe-best-match" in joined  # pip's choice across indexes
    assert "--compile-bytecode" in command  # .pyc at install, as pip writes them
    assert "--find-links /wheels" in joined
    assert "--extra-index-url file:///a/simple --extra-index-url file:///b/simple" in joined
    assert "--constraint /etc/pins.txt" in joined  # pip's own constraint file too
    assert command[-3:] == ["-c", "constraints.txt", "x"]  # the caller's arguments, last
    assert env["SSL_CERT_FILE"] == "/certs.pem"


def test_without_uv_pip_installs_the_same_arguments(tmp_path: Path) -> None:
    log = tmp_path / "calls.txt"
    python = _fake_python(tmp_path / "venv", log)  # its pip "installs" uv but no uv appears
    assert _install().main([str(python), "-c", "constraints.txt", "-e", ".[dev]"]) == 0
    calls = log.read_text().splitlines()
    assert calls[0].startswith("-m pip install -q --progress-bar off uv==")  # bootstrap tried
    assert calls[-1] == "-m pip install --progress-bar off -c constraints.txt -e .[dev]"
