"""The shortcuts of measure_flops' hot path count exactly what the plain path counts."""

from __future__ import annotations

import gc

import pytest
import torch
import torch.nn as nn

from torchscan_stages import FlopReport
from torchscan_stages.analysis.operators import ModuleStack, OperatorCounter, measure_flops
from torchscan_stages.analysis.operators.tally import roll_up


class _Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.cholesky(torch.eye(2)).sum() + self.fc(x)  # cholesky: uncounted


class _Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = _Inner()
        self.head = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.inner(x))


def _nograd(model: nn.Module, x: torch.Tensor):
    def workload() -> torch.Tensor:
        with torch.no_grad():
            return model(x)

    return workload


def test_roll_up_adds_each_key_into_every_ancestor_once() -> None:
    sums = {"R.a.b.c": [5, 0], "R.a": [1, 0], "R.x": [2, 1], "R.a.b.d": [7, 2]}
    roll_up(sums)
    # R.a.b (created) = c 5 + d 7 = 12 with 2 missing; R.a = own 1 + 12 = 13
    # R (created) = R.a 13 + R.x 2 = 15, missing 2 + 1 = 3
    assert sums["R.a.b"] == [12, 2]
    assert sums["R.a"] == [13, 2]
    assert sums["R"] == [15, 3]
    assert sums["R.a.b.c"] == [5, 0] and sums["R.x"] == [2, 1]


def test_partial_module_propagates_to_every_ancestor() -> None:
    torch.manual_seed(0)
    report = measure_flops(_nograd(_Outer().eval(), torch.randn(1, 4)))
    # inner.fc: addmm 2*1*4*3 = 24; head: addmm 2*1*3*2 = 12 (the cholesky, its sum and the
    # add run in _Inner's own forward, so they belong to _Outer.inner)
    by_module = report.by_module
    assert by_module["_Outer.inner.fc"].status == "complete"
    assert by_module["_Outer.inner.fc"].value == 24
    assert by_module["_Outer.head"].value == 12
    # _Outer.inner owns the uncounted cholesky: partial, and so is the root above it
    assert by_module["_Outer.inner"].status == "partial"
    assert by_module["_Outer"].status == "partial"
    inner, root = by_module["_Outer.inner"].known_value, by_module["_Outer"].known_value
    assert inner is not None and root == inner + 12  # the root adds head's 12
    assert report.total.status == "partial" and report.total.known_value == root


def test_module_registered_twice_is_named_once_and_counted_each_call() -> None:
    shared = nn.Linear(4, 4)
    model = nn.Sequential(shared, nn.ReLU(), shared).eval()
    report = measure_flops(_nograd(model, torch.randn(2, 4)))
    # addmm 2*2*4*4 = 64 per call, two calls owned by the first name; relu 2*4 = 8
    assert report.by_module["Sequential.0"].value == 128
    assert "Sequential.2" not in report.by_module
    assert report.by_module["Sequential"].value == 136


def test_callable_owner_and_module_stack_owner_agree() -> None:
    torch.manual_seed(0)
    model, x = _Outer().eval(), torch.randn(1, 4)
    stacked = measure_flops(_nograd(model, x))
    owner = ["_Outer"]
    with OperatorCounter(owner=lambda: owner[0]) as counter:
        _nograd(model, x)()
    # one owner for everything: its count is the root's rolled-up count above
    assert counter.total().known_value == stacked.total.known_value
    single = counter.report().by_module["_Outer"]
    assert single.known_value == stacked.by_module["_Outer"].known_value


def test_compiled_workload_counts_as_eager() -> None:
    """The counting mode drops torch's Dynamo-disable wrapper (for speed): a workload that
    compiles (and first traces) under the mode must still count what eager counts."""
    w = torch.randn(8, 8)

    def product(t: torch.Tensor) -> torch.Tensor:
        return torch.relu(t @ w)

    compiled = torch.compile(product, backend="eager")
    x = torch.randn(2, 8)
    eager = measure_flops(lambda: product(x))
    first = measure_flops(lambda: compiled(x))  # traced under the counting mode
    again = measure_flops(lambda: compiled(x))  # the compiled code, already built
    # mm 2*2*8*8 = 256, relu 2*8 = 16 -> 272, in all three
    assert eager.total.value == 272
    assert first.total.value == 272 and first.total.status == "complete"
    assert again.total.value == 272 and again.total.status == "complete"


def test_modules_inside_an_uncalled_container_get_their_full_path() -> None:
    class Stack(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])  # never called

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = layer(x)
            return x

    report = measure_flops(_nograd(Stack().eval(), torch.randn(1, 4)))
    # addmm 2*1*4*4 = 32 per layer, each under its own path (not both under "Linear")
    assert report.by_module["Stack.layers.0"].value == 32
    assert report.by_module["Stack.layers.1"].value == 32
    assert report.by_module["Stack.layers"].value == 64 and report.by_module["Stack"].value == 64
    assert "Linear" not in report.by_module


def test_module_stack_names_what_named_modules_names() -> None:
    """The tracker's own walk gives each module the path ``named_modules`` gives it: a shared
    module once at its first path, an empty container (falsy: len 0) kept, a ``None`` child
    skipped."""
    shared = nn.Linear(2, 2)
    model = nn.Sequential(
        nn.Sequential(shared, nn.ModuleList()),
        nn.ModuleDict({"b": nn.ReLU(), "a": shared}),
        shared,
    )
    model.register_module("missing", None)
    tracker = ModuleStack()
    assert tracker._name(model) == "Sequential"
    expected = {id(m): path for path, m in model.named_modules(prefix="Sequential")}
    assert tracker._names == expected
    # root, 0, 0.0 (shared), 0.1 (empty list), 1, 1.b -- "1.a" and "2" are shared again
    assert sorted(tracker._names.values()) == [
        "Sequential",
        "Sequential.0",
        "Sequential.0.0",
        "Sequential.0.1",
        "Sequential.1",
        "Sequential.1.b",
    ]
    tracker.__exit__()


def test_report_fields_are_what_validation_would_make() -> None:
    """report() builds its FlopReport without re-validating typed parts: validating its dump
    gives an equal report, with every field set."""
    report = measure_flops(_nograd(_Outer().eval(), torch.randn(1, 4)), name="outer")
    assert FlopReport.model_validate(report.model_dump()) == report
    assert report.model_fields_set == set(FlopReport.model_fields)


def test_name_that_is_not_a_string_is_refused_before_the_workload_runs() -> None:
    ran = []
    with pytest.raises(TypeError, match="name must be a str or None, got int 3"):
        measure_flops(lambda: ran.append(1), name=3)  # type: ignore[arg-type]
    assert ran == []


@pytest.mark.parametrize("collecting", [True, False])
def test_collector_paused_during_the_workload_and_restored(collecting: bool) -> None:
    seen: list[bool] = []

    def workload() -> torch.Tensor:
        seen.append(gc.isenabled())
        return torch.ones(2) * 2

    def failing() -> None:
        raise ValueError("boom")

    was = gc.isenabled()
    (gc.enable if collecting else gc.disable)()
    try:
        measure_flops(workload)
        assert seen == [False] and gc.isenabled() is collecting
        with pytest.raises(ValueError, match="boom"):
            measure_flops(failing)
        assert gc.isenabled() is collecting
    finally:
        (gc.enable if was else gc.disable)()
