"""Resource hygiene: repeated crawls do not grow memory; nothing is left after errors/signals.

"Left" means: a dispatch mode on torch's mode stack, an enabled profiler, a global or module
hook, a changed training flag or grad mode, or a child process still running. These are
memory and state assertions, never timing ones.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
import torch
from signal_defaults import python_sigint
from torch import nn
from torch.nn.modules import module as torch_module
from torch.utils._python_dispatch import _get_current_dispatch_mode

from torchscan_stages import (
    crawl_module,
    measure_flops,
    measure_latency,
    measure_peak_memory,
    measure_peak_rss,
    profile_workload,
)

MIB = 2**20


def _small() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))


def _rss() -> int:
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def test_1000_crawls_do_not_grow_rss() -> None:
    model = _small()
    for _ in range(100):  # warm-up: caches, allocator arenas, lazily imported formulas
        crawl_module(model, (8,))
    before = _rss()
    for _ in range(1000):
        crawl_module(model, (8,))
    grown = _rss() - before
    # one crawl's report of this model is a few KiB; a leak of one report per crawl would
    # grow RSS by several MiB over 1,000 crawls. 4 MiB of slack covers allocator noise.
    assert grown < 4 * MIB, f"RSS grew by {grown / MIB:.1f} MiB over 1,000 crawls"


def _global_state() -> dict[str, Any]:
    """Everything a measurement may change in torch's global state."""
    return {
        "dispatch_mode": _get_current_dispatch_mode(),
        "profiler": torch.autograd.profiler._is_profiler_enabled,
        "forward_hooks": dict(torch_module._global_forward_hooks),
        "forward_pre_hooks": dict(torch_module._global_forward_pre_hooks),
        "backward_hooks": dict(torch_module._global_backward_hooks),
        "grad": torch.is_grad_enabled(),
        "threads": torch.get_num_threads(),
        "children": sorted(p.pid for p in psutil.Process().children(recursive=True)),
    }


def _module_state(model: nn.Module) -> list[tuple[str, bool, int, int]]:
    return [
        (name, m.training, len(m._forward_hooks), len(m._forward_pre_hooks))
        for name, m in model.named_modules()
    ]


class Boom(RuntimeError):
    pass


class Exploding(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = _small()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.inner(x)
        raise Boom("forward failed")


class Interrupting(nn.Module):
    """Ctrl-C arriving inside the forward: a BaseException that ``except Exception`` misses."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise KeyboardInterrupt


def _failing_workload(error: type[BaseException]) -> Callable[[], Any]:
    model = Exploding() if error is Boom else nn.Sequential(_small(), Interrupting())
    return lambda: model(torch.randn(2, 8))


MEASUREMENTS: dict[str, Callable[[Callable[[], Any]], Any]] = {
    "measure_flops": measure_flops,
    "measure_peak_memory": measure_peak_memory,
    "profile_workload": lambda w: profile_workload(w, warmup_calls=0),
    "measure_latency": measure_latency,
}


@pytest.mark.parametrize("error", [Boom, KeyboardInterrupt])
@pytest.mark.parametrize("name", sorted(MEASUREMENTS))
def test_a_failing_workload_leaves_nothing_behind(name: str, error: type[BaseException]) -> None:
    before = _global_state()
    with pytest.raises(error):
        MEASUREMENTS[name](_failing_workload(error))
    assert _global_state() == before


@pytest.mark.parametrize("error", [Boom, KeyboardInterrupt])
@pytest.mark.parametrize("training", [True, False])
def test_a_failing_crawl_leaves_the_model_and_torch_as_found(
    training: bool, error: type[BaseException]
) -> None:
    model: nn.Module = Exploding() if error is Boom else nn.Sequential(_small(), Interrupting())
    model.train(training)
    list(model.modules())[-2].train(not training)  # a mixed model: every flag must come back
    before, modules = _global_state(), _module_state(model)
    with pytest.raises(error):
        crawl_module(model, (8,))
    assert _global_state() == before
    assert _module_state(model) == modules


def _child_pid_when_started(pid_file: Path) -> int:
    for _ in range(1200):  # bounded: 1200 x 50 ms for the child to start
        if pid_file.exists() and pid_file.read_text():
            return int(pid_file.read_text())
        time.sleep(0.05)
    raise AssertionError("the measured child never started")


def _gone(pid: int) -> bool:
    for _ in range(200):  # bounded: 200 x 50 ms
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs process groups")
def test_ctrl_c_during_measure_peak_rss_leaves_no_child(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to this very process) while a long child is measured."""
    pid_file = tmp_path / "child.pid"
    script = f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
    script += "time.sleep(600)\n"
    found: list[int] = []

    def interrupt() -> None:
        found.append(_child_pid_when_started(pid_file))
        os.kill(os.getpid(), signal.SIGINT)

    # Python's own Ctrl-C handler, as an interactive session has it: a suite started in the
    # background by a non-interactive shell inherits SIGINT ignored, which measure_peak_rss
    # rightly leaves ignored (the test would then wait out its 600 s child)
    with python_sigint():
        before = _global_state()
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        thread = threading.Thread(target=interrupt, daemon=True)
        thread.start()
        with pytest.raises(KeyboardInterrupt):
            measure_peak_rss([sys.executable, "-c", script], timeout=600)
        thread.join(timeout=60)
        after = {s: signal.getsignal(s) for s in handlers}
    (child,) = found
    assert _gone(child), "the measured child outlived Ctrl-C"
    assert _global_state() == before
    assert after == handlers


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs process groups")
def test_an_error_while_measuring_rss_leaves_no_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any exception in the measuring loop (here: the sampler fails) still kills the child."""
    import torchscan_stages.measure.rss_sampler as sampler_module

    pid_file = tmp_path / "child.pid"
    script = f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
    script += "time.sleep(600)\n"
    original = sampler_module.Sampler.sample

    def failing_sample(self: Any) -> None:
        original(self)
        if pid_file.exists() and pid_file.read_text():
            raise RuntimeError("sampler failed")

    monkeypatch.setattr(sampler_module.Sampler, "sample", failing_sample)
    before = _global_state()
    with pytest.raises(RuntimeError, match="sampler failed"):
        measure_peak_rss([sys.executable, "-c", script], timeout=600)
    assert _gone(int(pid_file.read_text())), "the measured child outlived the error"
    assert _global_state() == before
