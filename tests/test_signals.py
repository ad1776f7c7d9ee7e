"""Ending signals become exceptions (cleanup runs) and renames that belong together wait."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from signal_defaults import python_sigint

from torchscan_stages._signals import Terminated, ending_signals_raise, signals_deferred

ROOT = Path(__file__).resolve().parents[1]


def test_sigterm_inside_raises_terminated_and_the_default_comes_back() -> None:
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("the test runner handles SIGTERM itself")
    with pytest.raises(Terminated) as ended, ending_signals_raise(redeliver=False):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10_000):  # the handler runs at the next bytecode boundary
            pass
    assert ended.value.exit_code == 143  # 128 + 15
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_sigint_is_deferred_to_the_end_of_the_block() -> None:
    done: list[str] = []
    with python_sigint():  # not the SIG_IGN a background launch inherits
        with pytest.raises(KeyboardInterrupt), signals_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10_000):
                pass
            done.append("renamed")  # the block finished before the interrupt acted
        after = signal.getsignal(signal.SIGINT)
    assert done == ["renamed"]
    assert after is signal.default_int_handler  # the handler before the block, given back


@pytest.mark.parametrize("name", ["r.json", "r.json.gz"])
def test_sigterm_during_report_save_leaves_no_temporary(tmp_path: Path, name: str) -> None:
    # the first fsync (data written, not yet renamed) sends SIGTERM to the saving process
    script = (
        "import os, signal, sys\n"
        "real = os.fsync\n"
        "def fsync(fd):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    real(fd)\n"
        "os.fsync = fsync\n"
        "from torch import nn\n"
        "from torchscan_stages import crawl_module\n"
        f"crawl_module(nn.Linear(4, 3), (4,)).save({str(tmp_path / name)!r})\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False,
    )  # fmt: skip
    assert done.returncode == -signal.SIGTERM, done.stderr[-2000:]  # died of it, as asked
    assert list(tmp_path.iterdir()) == []  # no report, no .r.json.XXXXXXXX.tmp
