"""measure_flops / OperatorCounter: outcomes, custom mappings, strictness, state restoration."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn as nn
from torch.nn.modules import module as nn_module
from torch.utils import flop_counter
from torch.utils._python_dispatch import _get_current_dispatch_mode

from torchscan_stages.analysis.operators import (
    OperatorCounter,
    OwnerOps,
    StackOwner,
    classify_custom_mapping,
    measure_flops,
)
from torchscan_stages.report import FlopReport, IncompleteAnalysisError, load_report

aten = torch.ops.aten


def _mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4)
    ).eval()


def _forward(model: nn.Module, x: torch.Tensor):
    def workload() -> torch.Tensor:
        with torch.no_grad():
            return model(x)

    return workload


def test_mlp_total_by_operator_and_module() -> None:
    report = measure_flops(_forward(_mlp(), torch.randn(8, 16)), name="mlp")
    # addmm: 2*8*16*32 = 8192, 2*8*32*32 = 16384, 2*8*32*4 = 2048 -> 26624
    # gelu 8*32 = 256, relu 8*32 = 256 -> 27136
    assert report.total.status == "complete"
    assert report.total.value == 27136
    assert report.total.method == "operator_dispatch" and report.total.unit == "FLOPs"
    assert report.by_operator["aten.addmm"].calls == 3
    assert report.by_operator["aten.addmm"].flops.value == 26624
    assert report.by_operator["aten.gelu"].flops.value == 256
    # by_module: inclusive, dotted names rooted at the outermost module's class
    assert report.by_module["Sequential.0"].value == 8192
    assert report.by_module["Sequential.4"].value == 2048
    assert report.by_module["Sequential"].value == 27136
    ignored = {item.operator: item for item in report.ignored_operators}
    assert ignored["aten.t"].calls == 3  # one weight transpose per Linear
    assert "view" in ignored["aten.t"].reason
    assert report.name == "mlp" and not report.diagnostics
    assert report.conventions["pointwise"].startswith("1 FLOP per output element")
    assert load_report(report.model_dump_json()) == report


def test_uncounted_operator_gives_partial_and_diagnostic() -> None:
    a = torch.randn(4, 4)
    spd = a @ a.T + 4 * torch.eye(4)

    def workload() -> None:
        torch.linalg.cholesky(spd)
        spd @ spd  # mm: 2*4*4*4 = 128

    report = measure_flops(workload)
    assert report.total.status == "partial"
    assert report.total.value is None and report.total.known_value == 128
    (diagnostic,) = report.diagnostics
    assert diagnostic.code == "uncounted_operator"
    assert diagnostic.operator == "aten.linalg_cholesky_ex" and diagnostic.count == 1
    assert "aten.linalg_cholesky_ex" in diagnostic.message
    assert report.by_operator["aten.linalg_cholesky_ex"].flops.status == "unavailable"
    with pytest.raises(IncompleteAnalysisError) as raised:
        measure_flops(workload, strict=True)
    assert isinstance(raised.value.report, FlopReport)
    assert raised.value.report.total.known_value == 128


def test_custom_mapping_completes_and_stays_scoped() -> None:
    spd = torch.eye(6) * 2
    registry_before = dict(flop_counter.flop_registry)

    def cholesky_flops(a_shape, *args, out_shape=None, **kwargs) -> int:
        return a_shape[-1] ** 3 // 3

    report = measure_flops(
        lambda: torch.linalg.cholesky(spd),
        custom_mapping={aten.linalg_cholesky_ex: cholesky_flops},
        strict=True,
    )
    assert report.total.value == 72  # 6**3 // 3
    assert flop_counter.flop_registry == registry_before
    assert measure_flops(lambda: torch.linalg.cholesky(spd)).total.status == "partial"


def test_custom_mapping_overrides_builtin_and_accepts_overloads() -> None:
    a = torch.randn(3, 5)
    b = torch.randn(5, 2)
    by_packet = measure_flops(lambda: a @ b, custom_mapping={aten.mm: lambda *s, **k: 7})
    by_overload = measure_flops(lambda: a @ b, custom_mapping={aten.mm.default: lambda *s, **k: 11})
    default = measure_flops(lambda: a @ b)
    assert (by_packet.total.value, by_overload.total.value) == (7, 11)
    assert default.total.value == 60  # 2*3*5*2


def test_custom_op_without_formula_then_with_one() -> None:
    @torch.library.custom_op("tsst_test_ops::double", mutates_args=())
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    x = torch.ones(5)
    report = measure_flops(lambda: double(x))
    assert report.total.status == "partial" and report.total.known_value == 0
    assert report.diagnostics[0].operator == "tsst_test_ops.double"
    mapped = measure_flops(
        lambda: double(x),
        custom_mapping={torch.ops.tsst_test_ops.double: lambda s, out_shape=None: s[0]},
    )
    assert mapped.total.status == "complete" and mapped.total.value == 5  # 1 per element


@pytest.mark.parametrize(
    ("mapping", "match"),
    [
        ({"aten.mm": len}, "'aten.mm'"),
        ({torch.mm: len}, "built-in"),
        ({aten.mm: 3}, "custom_mapping\\[aten.mm\\]"),
        ([(aten.mm, len)], "must be a mapping"),
    ],
)
def test_bad_custom_mapping_raises_type_error_before_running(mapping, match) -> None:
    calls = []
    with pytest.raises(TypeError, match=match):
        measure_flops(lambda: calls.append(1), custom_mapping=mapping)
    assert calls == []
    with pytest.raises(TypeError, match=match):
        classify_custom_mapping(mapping)


def test_not_callable_workload() -> None:
    with pytest.raises(TypeError, match="workload must be a zero-argument callable"):
        measure_flops(42)  # type: ignore[arg-type]


class _Boom(RuntimeError):
    pass


class _Exploding(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.inner(x)
        raise _Boom("forward failed")


@pytest.mark.parametrize("grad", [False, True])
def test_workload_error_propagates_and_leaves_no_state(grad: bool) -> None:
    model = _Exploding()
    pre_hooks = len(nn_module._global_forward_pre_hooks)
    hooks = len(nn_module._global_forward_hooks)
    error = _Boom("outer")

    def workload() -> None:
        with torch.set_grad_enabled(grad):
            try:
                model(torch.randn(2, 3, requires_grad=grad))
            except _Boom:
                raise error from None

    with pytest.raises(_Boom) as raised:
        measure_flops(workload)
    assert raised.value is error
    assert _get_current_dispatch_mode() is None
    assert len(nn_module._global_forward_pre_hooks) == pre_hooks
    assert len(nn_module._global_forward_hooks) == hooks
    assert torch.is_grad_enabled()


def test_operator_counter_owner_interface() -> None:
    owner = ["a"]
    x = torch.randn(2, 3)
    w = torch.randn(3, 4)
    with OperatorCounter(owner=lambda: owner[0]) as counter:
        x @ w  # mm: 2*2*3*4 = 48, owned by "a"
        owner[0] = "b"
        torch.relu(x)  # 6, owned by "b"
        x.t()  # ignored
        owner[0] = None  # type: ignore[call-overload]
        torch.linalg.cholesky(torch.eye(2))  # uncounted, no owner
    ops = counter.owner_ops()
    assert ops["a"] == OwnerOps(
        flops=48, product_flops=48, counted_calls={"aten.mm": 1}, op_flops={"aten.mm": 48}
    )
    assert ops["b"].flops == 6 and ops["b"].ignored_calls == {"aten.t": 1}
    assert ops[None].uncounted_calls == {"aten.linalg_cholesky_ex": 1}
    assert ops[None].ignored_calls["aten.eye"] == 1
    report = counter.report(scope="forward")
    assert report.total.status == "partial" and report.total.known_value == 54
    assert report.total.scope == "forward"
    assert report.by_module["a"].value == 48 and report.by_module["b"].value == 6


def test_stack_owner_counts_as_a_callable_owner() -> None:
    x, w = torch.randn(2, 3), torch.randn(3, 4)

    def run(make_owner: Callable[[list[str]], Any]) -> dict[Any, OwnerOps]:
        keys: list[str] = []
        with OperatorCounter(owner=make_owner(keys)) as counter:
            torch.relu(x)  # 6, no owner
            keys.append("a")
            x @ w  # mm: 2*2*3*4 = 48, owned by "a"
            keys.append("a.b")
            torch.relu(x)  # 6, owned by "a.b"
            keys.pop()
            x.t()  # ignored, owned by "a"
            keys.pop()
        assert counter.live_owners() == counter.owner_ops()  # the same content, not copied
        assert counter.live_owners() is counter.live_owners()
        return counter.owner_ops()

    fast = run(StackOwner)
    assert type(StackOwner([])) is StackOwner and StackOwner(["k"])() == "k"
    plain = run(lambda keys: lambda: keys[-1] if keys else None)
    assert fast == plain
    assert fast["a"].flops == 48 and fast["a"].ignored_calls == {"aten.t": 1}
    assert fast["a.b"].flops == 6 and fast[None].flops == 6


def test_operator_counter_is_not_reentrant_and_restores_mode() -> None:
    counter = OperatorCounter()
    with counter, pytest.raises(RuntimeError, match="not reentrant"):
        counter.__enter__()
    assert _get_current_dispatch_mode() is None


def test_broken_custom_formula_is_uncounted_not_fatal() -> None:
    def broken(*shapes, out_shape=None, **kwargs) -> int:
        raise ValueError("bad formula")

    report = measure_flops(lambda: torch.ones(2) + 1, custom_mapping={aten.add: broken})
    assert report.total.status == "partial"
    assert "bad formula" in report.diagnostics[0].message


def test_training_step_is_complete() -> None:
    torch.manual_seed(0)
    linear = nn.Linear(4, 3)
    x = torch.randn(2, 4)
    optimizer = torch.optim.SGD(linear.parameters(), lr=0.1)

    def step() -> None:
        optimizer.zero_grad()
        linear(x).pow(2).mean().backward()
        optimizer.step()

    step()  # first step outside the measurement
    report = measure_flops(step)
    assert report.total.status == "complete"
    assert report.by_operator["aten.addmm"].flops.value == 48  # forward 2*2*4*3
    assert report.by_operator["aten.mm"].flops.value == 48  # grad weight 2*3*2*4
    assert report.by_operator["aten.add_"].flops.value == 15  # SGD: 12 weights + 3 biases
    assert report.total.value == sum(op.flops.value or 0 for op in report.by_operator.values())
    # forward addmm 48 + backward mm 48 + bias grad sum 2*3 = 6, attributed to the Linear
    assert report.by_module["Linear"].value == 102


def test_fractional_custom_formula_is_uncounted_not_truncated() -> None:
    layer = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    report = measure_flops(
        lambda: layer(x), custom_mapping={torch.ops.aten.addmm: lambda *a, **k: 2.5}
    )
    # 2.5 FLOPs cannot be right: the op becomes uncounted (partial), never a complete 2
    assert report.total.status == "partial"
    messages = [d.message for d in report.diagnostics if d.code == "uncounted_operator"]
    assert any("fractional count 2.5" in m for m in messages), messages


def test_generator_workload_gets_lazy_output() -> None:
    model = nn.Linear(8, 4)

    def lazy():  # a generator function: calling it runs none of its body
        yield model(torch.randn(2, 8))

    report = measure_flops(lazy)
    # nothing ran before the work was deferred: 0 counted FLOPs is no lower bound, so the
    # total is unavailable (never a complete 0), and the diagnostic says why
    assert report.total.status == "unavailable"
    assert report.product_flops is not None and report.product_flops.status == "unavailable"
    codes = [d.code for d in report.diagnostics]
    assert codes == ["lazy_output"]
    assert "generator" in report.diagnostics[0].message


def test_generator_after_real_work_is_a_lower_bound() -> None:
    model = nn.Linear(8, 4, bias=False)

    def half_lazy():
        model(torch.randn(2, 8))  # runs now: mm of (2,8)x(8,4) = 2 * 2*8*4 = 128 FLOPs
        return (model(torch.randn(2, 8)) for _ in range(1))  # deferred, never run

    report = measure_flops(half_lazy)
    assert report.total.status == "partial" and report.total.known_value == 128
    assert [d.code for d in report.diagnostics] == ["lazy_output"]


def test_empty_batch_gets_empty_work() -> None:
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU())
    x = torch.randn(0, 8)  # a batch of 0

    report = measure_flops(lambda: model(x))
    # addmm on (0,8)x(8,4) = 2*0*8*4 = 0 FLOPs; relu on 0 elements = 0: true for no work
    assert report.total.status == "complete" and report.total.value == 0
    empty = [d for d in report.diagnostics if d.code == "empty_work"]
    # operators: t (a view), addmm, relu and the detach relu saves for backward = 4 calls,
    # none of which made a non-empty tensor
    assert len(empty) == 1 and empty[0].count == 4
    assert empty[0].metric == "operator_flops"


def test_non_empty_batch_has_no_empty_work() -> None:
    model = nn.Linear(8, 4)
    x = torch.randn(1, 8)
    report = measure_flops(lambda: model(x))
    assert "empty_work" not in [d.code for d in report.diagnostics]
    assert report.total.value == 2 * 1 * 8 * 4  # addmm, torch convention: 2*M*K*N = 64
