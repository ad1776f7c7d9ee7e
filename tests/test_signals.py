"""Ending signals become exceptions (cleanup runs) and renames that belong together wait."""

from __future__ import annotations

import os
import signal

import pytest

from torchscan_stages._signals import Terminated, ending_signals_raise, signals_deferred


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
    with pytest.raises(KeyboardInterrupt), signals_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000):
            pass
        done.append("renamed")  # the block finished before the interrupt acted
    assert done == ["renamed"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
