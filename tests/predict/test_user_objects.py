"""A prediction leaves every user object as it found it: the next real step is bit-identical.

The step below touches everything a training loop holds: a model with BatchNorm buffers and
dropout (torch's RNG), AdamW, an LR scheduler, a GradScaler (whose ``_scale`` and
per-optimizer ``found_inf`` tensors the fake run would otherwise leave fake), a Python list
it logs into, a dict counter, Python's ``random``, and a forward hook it registers on every
call. Each scenario runs one real step, then (or not) a prediction that succeeds, raises or
is interrupted, then one more real step; every piece of state must equal, bit for bit, that
of two real steps with no prediction between them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from torchscan_stages.predict import predict_peak_memory


def _loop(seed: int) -> tuple[Callable[[], None], dict[str, Any], dict[str, Any]]:
    torch.manual_seed(seed)
    random.seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Dropout(0.2), nn.Linear(16, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**4)
    x = torch.randn(32, 8)
    log: list[float] = []
    counter = {"steps": 0, "hooked": 0}
    mode = {"raise": None}

    def hook(module: nn.Module, args: Any, out: Any) -> None:
        counter["hooked"] += 1

    def step() -> None:
        model.register_forward_hook(hook)  # one more hook each step: it must not stay
        loss = (model(x + torch.rand(1)) ** 2).mean()  # torch.rand: the RNG moves
        scaler.scale(loss).backward()
        counter["steps"] += 1
        if mode["raise"] is not None:  # a failing (or interrupted) step, after the backward
            raise mode["raise"]
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        scheduler.step()
        log.append(loss.item() + random.random())

    objects = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "scaler": scaler}
    return step, objects, {"log": log, "counter": counter, "mode": mode}


def _state(objects: dict[str, Any], plain: dict[str, Any]) -> dict[str, Any]:
    model = objects["model"]
    return {
        "tensors": {k: v.clone() for k, v in model.state_dict().items()},
        "optimizer": objects["optimizer"].state_dict(),
        "scheduler": objects["scheduler"].state_dict(),
        "scaler": objects["scaler"].state_dict(),
        "hooks": len(model._forward_hooks),
        "training": [m.training for m in model.modules()],
        "log": list(plain["log"]),
        "counter": dict(plain["counter"]),
        "torch_rng": torch.get_rng_state(),
        "python_rng": random.getstate(),
    }


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@pytest.fixture(scope="module")
def never_predicted() -> dict[str, Any]:
    step, objects, plain = _loop(0)
    step()
    step()
    return _state(objects, plain)


@pytest.mark.parametrize("outcome", ["success", "raises", "interrupted"])
def test_next_real_step_is_bit_identical(outcome: str, never_predicted: dict[str, Any]) -> None:
    step, objects, plain = _loop(0)
    step()
    before = _state(objects, plain)
    if outcome == "success":
        report = predict_peak_memory(step, device="cpu")
        assert report.peak.status == "complete"  # the scaler's found_inf read goes on
    else:
        error = ValueError("stop") if outcome == "raises" else KeyboardInterrupt()
        plain["mode"]["raise"] = error
        with pytest.raises(type(error)):
            predict_peak_memory(step, device="cpu")
        plain["mode"]["raise"] = None
    after = _state(objects, plain)
    assert _same(before, after), outcome  # the prediction changed nothing the loop holds
    # the scaler holds real tensors again: its state_dict reads them (it raised before)
    assert all(type(v) is torch.Tensor for v in vars(objects["scaler"]).values()
               if isinstance(v, torch.Tensor))  # fmt: skip
    step()  # the next real step runs...
    assert _same(_state(objects, plain), never_predicted)  # ...exactly as without a prediction
