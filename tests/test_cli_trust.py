"""The summary command: a factory's exception (also SystemExit), a failing forward and an
unwritable --json each end in one line and a non-zero exit, nothing half-written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from signal_defaults import python_sigint

from torchscan_stages.commands.summary import main

ROOT = Path(__file__).resolve().parents[1]


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_factory_raising_systemexit_is_one_line_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # builtins:exit raises SystemExit: once nothing was printed and the exit was 0
    assert main(["--model", "builtins:exit", "--input-shape", "4"]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "--model 'builtins:exit': calling it raised SystemExit: None" in err
    assert "(called as builtins:exit() with no arguments)" in err


def test_a_forward_that_raises_is_one_line_naming_the_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "s.json"
    code = main(["--model", "torchscan_stages.zoo:small_resnet", "--input-shape", "4",
                 "--json", str(target)])  # fmt: skip
    assert code == 1 and not target.exists()
    err = _one_line(capsys.readouterr().err)
    assert "failed on its inputs (input_shape=(4,)): RuntimeError: Expected 3D" in err


def test_json_to_a_directory_is_refused_before_the_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["--model", "torch.nn.Identity", "--input-shape", "4", "--json", str(tmp_path)]) == 2
    )
    err = _one_line(capsys.readouterr().err)
    assert f"output '{tmp_path}' is a directory; name the file to write" in err
    assert list(tmp_path.iterdir()) == []


def test_json_to_an_unwritable_place_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    target = blocker / "s.json"  # under a file: "Not a directory"
    assert main(["--model", "torch.nn.Identity", "--input-shape", "4", "--json", str(target)]) == 1
    err = capsys.readouterr().err
    assert _one_line(err).startswith(f"summary: cannot write --json {target}: Not a directory")


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_a_command_is_one_line_and_its_exit_code(
    tmp_path: Path, sig: int, code: int
) -> None:
    # the factory signals this very process: Ctrl-C / kill during the command
    (tmp_path / "sigpkg.py").write_text(
        "import os, signal, torch\n"
        f"def build():\n    os.kill(os.getpid(), {int(sig)})\n"
        "    for _ in range(10**6):\n        pass\n    return torch.nn.Identity()\n"
    )
    with python_sigint():  # the child starts with Ctrl-C's default, not an inherited SIG_IGN
        done = subprocess.run(
            [sys.executable, "-m", "torchscan_stages", "summary", "--model", "sigpkg:build",
             "--input-shape", "4", "--json", str(tmp_path / "s.json")],
            cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])},
        )  # fmt: skip
    assert done.returncode == code, done.stderr[-2000:]  # 128 + 2, 128 + 15
    assert _one_line(done.stderr).startswith("summary: ")
    said = {signal.SIGINT: "interrupted by SIGINT", signal.SIGTERM: "terminated by SIGTERM"}[sig]
    assert said in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "s.json").exists()
