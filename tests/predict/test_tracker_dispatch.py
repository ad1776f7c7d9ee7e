"""The tracker's dispatch hot path: its argument walk and the Dynamo wrapper it drops.

``tensors_in`` replaces ``tree_flatten`` on every operator (for speed: docs/prediction.md's
capacity section); it must find exactly the tensors pytree finds, in the same order, or the
storages' event numbers (and so a peak's classification) would change.
"""

from __future__ import annotations

from collections import OrderedDict, namedtuple
from collections.abc import Callable
from typing import Any

import torch
from dynamo_counters import dynamo_counters_as_found
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from torchscan_stages import predict_peak_memory
from torchscan_stages.predict.sharded import ShardedTracker
from torchscan_stages.predict.tracker import PeakTracker, tensors_in

Pair = namedtuple("Pair", ["left", "right"])


def test_the_walk_finds_pytrees_tensors_in_pytrees_order() -> None:
    a, b, c, d, e = (torch.zeros(n + 1) for n in range(5))
    args = (a, [b, None, 3], (Pair(c, 2.0),), torch.float32, "s")
    kwargs = OrderedDict(out=d, alpha=1, extra={"x": [e]})
    walked = tensors_in(kwargs, tensors_in(args, []))
    leaves = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    assert [id(t) for t in walked] == [id(t) for t in leaves] == [id(t) for t in (a, b, c, d, e)]
    assert tensors_in(None, []) == [] and tensors_in(7, []) == []


def test_the_handlers_are_not_wrapped_by_dynamo_disable() -> None:
    # torch wraps a dispatch mode's handler in torch._dynamo.disable (functools.wraps: it
    # has __wrapped__) unless the class opts out, as a plain mode shows
    class Plain(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            return func(*args, **(kwargs or {}))

    assert hasattr(Plain.__dict__["__torch_dispatch__"], "__wrapped__")
    for kind in (PeakTracker, ShardedTracker):
        assert not hasattr(kind.__dict__["__torch_dispatch__"], "__wrapped__")


def test_a_compiled_step_predicts_what_the_eager_step_does() -> None:
    def product(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ w)

    compiled = torch.compile(product, backend="eager")

    def step(fn: Callable[..., Any]) -> Callable[[], None]:
        def run() -> None:
            w, x = torch.ones(64, 64), torch.ones(8, 64)
            fn(x, w)

        return run

    with dynamo_counters_as_found():  # a later test reads "this process compiled code"
        eager = predict_peak_memory(step(product), device="cpu")
        traced = predict_peak_memory(step(compiled), device="cpu")
    # w 64*64*4 = 16,384 B, x 8*64*4 = 2,048 B, x@w 2,048 B, relu 2,048 B: 22,528 B
    assert eager.peak.known_value == 22_528
    assert traced.peak.known_value == 22_528
