"""crawl_module under bad handler values, threads, deep models and odd outputs."""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch import nn

from torchscan_stages import ModuleHandler, crawl_module


class Leaf(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


@pytest.mark.parametrize("value", [-1000, float("nan"), float("inf"), True, -0.5])
def test_handler_returning_impossible_value_is_refused(value: Any) -> None:
    handler = ModuleHandler(lambda ctx: {"module_flops": value, "macs": 0, "dmas": 0}, name="bad")
    model = nn.Sequential(nn.Linear(4, 4), Leaf())
    report = crawl_module(model, (4,), custom_modules={Leaf: handler})
    failed = [d for d in report.diagnostics if d.code == "handler_failed"]
    assert len(failed) == 1
    assert "bad" in failed[0].message and "at 1 " in failed[0].message
    assert f"got {value!r}" in failed[0].message  # the value as given: -1000, nan, inf, True
    # never summed: the total keeps only the Linear's 2*4*4 + 4 = 36 FLOPs as a lower bound
    assert report.totals.module_flops.status == "partial"
    assert report.totals.module_flops.known_value == 36


def test_handler_metric_result_with_negative_bound_is_refused() -> None:
    # a negative count cannot even become a MetricResult, so no handler can return one
    from torchscan_stages import MetricResult

    with pytest.raises(ValueError, match="must be >= 0 for unit 'FLOPs'"):
        MetricResult.partial(-5, unit="FLOPs", scope="forward", method="module_formula")


class Shared(nn.Module):
    """A forward that lets another thread run the shared submodule while the crawl is on."""

    def __init__(self, shared: nn.Linear, other: nn.Module) -> None:
        super().__init__()
        self.shared = shared
        self.other = other

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        worker = threading.Thread(target=lambda: [self.other(x) for _ in range(5)])
        worker.start()
        worker.join()  # the other thread's 5 calls happen while the crawl's hooks are set
        return self.shared(x)


def test_crawl_counts_only_the_calls_of_its_own_thread() -> None:
    shared = nn.Linear(8, 8)
    other = nn.Sequential(shared, nn.ReLU())
    report = crawl_module(Shared(shared, other), (8,))
    # root + shared: the other thread's 5 x (Sequential, Linear, ReLU) calls are not recorded
    assert [layer.path for layer in report.layers] == ["", "shared"]
    # one Linear(8, 8) on one row: 2*8*8 + 8 bias adds = 136 FLOPs; operators: addmm 2*8*8
    assert report.totals.module_flops.value == 136
    assert report.totals.operator_flops.value == 128


class Gate(nn.Module):
    """Lets a test hold the first crawl inside its forward while a second one starts.

    Its state lives in one shared dict: with other threads alive the crawl runs the forward
    on a shallow copy of the module tree (``_own_flags``), whose attributes are its own."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)
        self.state: dict[str, Any] = {
            "entered": threading.Event(),
            "release": threading.Event(),
            "calls": 0,
        }

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        state = self.state
        state["calls"] += 1
        if state["calls"] == 1:  # the first crawl: start the second, give it a chance to enter
            state["second"] = threading.Thread(target=lambda: crawl_module(self, (2,)))
            state["second"].start()
            state["entered"].wait(timeout=0.5)  # with the lock it never enters meanwhile
        else:
            state["entered"].set()
            state["release"].wait(timeout=10)
        return self.linear(x)


def test_concurrent_crawls_of_one_model_leave_it_unchanged() -> None:
    model = Gate().train()
    crawl_module(model, (2,))
    model.state["release"].set()
    model.state["second"].join(timeout=30)
    assert not model.state["second"].is_alive()
    assert model.training and model.linear.training


def test_a_weight_normed_model_crawls_while_another_thread_lives() -> None:
    """With another thread alive a training-mode model is crawled on a shallow copy; a
    parametrised module refuses copy.copy ("Serialization of parametrized modules ...")."""
    from torch.nn.utils.parametrizations import weight_norm

    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        model = nn.Sequential(weight_norm(nn.Linear(4, 3)), nn.ReLU()).train()
        report = crawl_module(model, (4,))
    finally:
        stop.set()
        other.join()
    # weight_g 3 + weight_v 4*3 + bias 3 = 18 parameters; 4*3 = 12 MACs of the product
    assert (report.totals.parameters.value, report.totals.macs.value) == (18, 12)
    assert model.training and model[0].training


def _nest(depth: int) -> nn.Module:
    class Nest(nn.Module):
        def __init__(self, inner: nn.Module | None) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x if self.inner is None else self.inner(x)

    model: nn.Module | None = None
    for _ in range(depth):
        model = Nest(model)
    assert model is not None
    return model


def test_crawl_depth_limit_is_not_lower_than_a_plain_forward() -> None:
    x = torch.zeros(1)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(600)
    try:
        depth = 10
        while True:  # the deepest nest a plain forward runs under this limit
            try:
                _nest(depth + 10)(x)
            except RecursionError:
                break
            depth += 10
        report = crawl_module(_nest(depth), args=(x,))
        assert len(report.layers) == depth
        assert sys.getrecursionlimit() == 600  # restored after the crawl
    finally:
        sys.setrecursionlimit(limit)


class SelfContaining(nn.Module):
    def forward(self, x: torch.Tensor) -> list[Any]:
        out: list[Any] = [x * 1]
        out.append(out)
        return out


def test_output_that_contains_itself_is_described_not_recursed() -> None:
    report = crawl_module(SelfContaining(), (3,), custom_modules={SelfContaining: _zero()})
    output = report.layers[0].output
    assert output is not None and output.items is not None
    assert output.items[1].kind == "other" and output.items[1].type_name == "list (recursive)"


def _zero() -> ModuleHandler:
    return ModuleHandler(lambda ctx: {"module_flops": 3, "macs": 0, "dmas": 6})


class Lazy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> Iterator[torch.Tensor]:
        def steps() -> Iterator[torch.Tensor]:
            yield self.linear(x)

        return steps()


def test_generator_output_gives_lower_bounds_with_a_diagnostic() -> None:
    report = crawl_module(Lazy(), (4,))
    lazy = [d for d in report.diagnostics if d.code == "lazy_output"]
    assert len(lazy) == 1 and lazy[0].severity == "error"  # as measure_flops and the others
    for name in ("module_flops", "macs", "dmas", "operator_flops"):
        result = getattr(report.totals, name)
        assert result.status == "partial" and result.known_value == 0, name


def test_fill_from_operators_refuses_a_bad_item() -> None:
    with pytest.raises(TypeError, match="fill_from_operators: 'Leaf'"):
        crawl_module(Leaf(), (2,), fill_from_operators=["Leaf"])  # type: ignore[list-item]


def test_nan_never_reaches_a_total() -> None:
    handler = ModuleHandler(lambda ctx: {"module_flops": 1, "macs": math.nan, "dmas": 1})
    report = crawl_module(nn.Sequential(Leaf()), (2,), custom_modules={Leaf: handler})
    assert report.totals.macs.known_value is None or not math.isnan(report.totals.macs.known_value)


def test_empty_batch_is_not_a_silent_zero() -> None:
    report = crawl_module(nn.Linear(4, 4), args=(torch.zeros(0, 4),))
    empty = [d for d in report.diagnostics if d.code == "empty_input"]
    assert len(empty) == 1 and "[0, 4]" in empty[0].message
    assert report.totals.module_flops.value == 0  # no rows: 0 x (2*4*4 + 4) FLOPs, said above
