"""fvcore's own test cases, as the facts they state, run against this package.

No fvcore sdist ships its tests (checked: 0.1.2.post20201122, 0.1.4, 0.1.5.post20221221), so
this file holds what those tests state as data: the model's layers and input shapes, and the
count each test asserts, in fvcore's convention (one multiply-add = one "flop"). The models are
built here from those facts (the attribute names are fvcore's, so the per-module figures line
up). fvcore itself runs beside the package on every case and its live figures are recorded,
so a reader sees where the peer now disagrees with its own test.

Products (matmul, convolution, einsum, linear) compare directly with the package's MACs (both
the module crawl and operator dispatch). fvcore's figures for non-product operators (batch
norm, group norm, interpolation, adaptive pooling) are its own convention; there the package's
figure is checked against the closed form of its own documented convention
(docs/operator-flops.md), written beside each case, and fvcore's figure is listed.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from peer_judge import classify_error, one_line
from peer_outputs import Case, compare_figure
from torch import nn


class Wrap(nn.Module):
    """A module whose forward is ``fn(self, *args)``, children given by name."""

    def __init__(self, fn: Callable[..., Any], **children: nn.Module) -> None:
        super().__init__()
        self.fn = fn
        for name, child in children.items():
            setattr(self, name, child)

    def forward(self, *args: Any) -> Any:
        return self.fn(self, *args)


@dataclass(frozen=True)
class Fact:
    """One fvcore test case: how to build it, and the figures the test asserts."""

    test: str
    build: Callable[[], tuple[nn.Module, tuple[Any, ...]]]
    macs: dict[str, int]  # fvcore "flops" (= MACs for products) per module path, "" = total
    ours: int | None = None  # non-product: the package's documented operator FLOPs
    why: str = ""  # the arithmetic of ``ours`` and of fvcore's convention
    train: bool = False
    as_flops: tuple[str, ...] = ()  # paths whose fvcore figure is the package's module FLOPs
    params: dict[str, int] = field(default_factory=dict)  # parameter counts (no forward)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def _conv(c: tuple[int, ...]) -> Any:
    """``c``: (dim, batch, Cin, Cout, spatial, k, padding, stride, groups)."""
    dim, b, cin, cout, s, k, p, st, g = c

    def build() -> tuple[nn.Module, tuple[Any, ...]]:
        layer = (nn.Conv1d, nn.Conv2d, nn.Conv3d)[dim - 1](cin, cout, k, st, p, groups=g)
        return Wrap(lambda m, x: m.conv(x), conv=layer), (_randn(b, cin, *[s] * dim),)

    return build


def _deconv(b: int, cin: int, cout: int, s: int, k: int, p: int, st: int, op: int) -> Any:
    def build() -> tuple[nn.Module, tuple[Any, ...]]:
        layer = nn.ConvTranspose2d(cin, cout, k, st, p, output_padding=op)
        return Wrap(lambda m, x: m.conv(x), conv=layer), (_randn(b, cin, s, s),)

    return build


def _fn(fn: Callable[..., Any], *inputs: Any) -> Any:
    """A model calling ``fn``: a layer becomes its child ``layer``, a function is called."""
    if isinstance(fn, nn.Module):
        return lambda: (Wrap(lambda m, *a: m.layer(*a), layer=fn), tuple(inputs))
    return lambda: (Wrap(lambda _, *a: fn(*a)), tuple(inputs))


def _conv_macs(c: tuple[int, ...]) -> int:
    """fvcore's closed form: batch x Cin x Cout x k^d x out^d / groups."""
    dim, b, cin, cout, s, k, p, st, g = c
    out = (s + 2 * p - k) // st + 1
    return b * cin * cout * k**dim * out**dim // g


def _three_net() -> tuple[nn.Module, tuple[Any, ...]]:
    def forward(m: Any, x: torch.Tensor) -> torch.Tensor:
        return m.linear2(m.linear1(torch.flatten(m.pool(m.conv(x)), 1)))

    model = Wrap(
        forward,
        conv=nn.Conv2d(2, 5, 1, 1),
        pool=nn.AdaptiveAvgPool2d((1, 1)),
        linear1=nn.Linear(5, 3),
        linear2=nn.Linear(3, 1),
    )
    return model, (_randn(4, 2, 10, 10),)


def _nested() -> nn.Module:
    inner = Wrap(
        lambda m, x: 3 * m.fc(torch.flatten(m.conv(x.reshape(-1, 2, 5)), 1)) + 1,
        conv=nn.Conv1d(2, 2, 1),
        fc=nn.Linear(10, 10),
    )
    return Wrap(
        lambda m, x: m.submod(m.fc(torch.flatten(m.conv(x), 1))) ** 2,
        submod=inner,
        fc=nn.Linear(20, 10),
        conv=nn.Conv1d(4, 4, 3, padding=1),
    )


def _recursive(m: Any, x: torch.Tensor, count: int = 3) -> torch.Tensor:
    return m(x, count - 1) if count > 0 else m.fc(x)


def _shared() -> tuple[nn.Module, tuple[Any, ...]]:
    inner, multiname = nn.Linear(10, 10), nn.Linear(10, 1)

    def forward(m: Any, x: torch.Tensor) -> torch.Tensor:
        x = m.submod1(x) + m.submod2(x)
        return m.multiname1(x) + m.multiname2(x)

    model = Wrap(
        forward,
        submod1=Wrap(lambda m, x: m.submod(x), submod=inner),
        submod2=Wrap(lambda m, x: m.submod(x), submod=inner),
        multiname1=multiname,
        multiname2=multiname,
    )
    return model, (_randn(1, 10),)


def _repeated(m: Any, x: torch.Tensor) -> torch.Tensor:
    for _ in range(3):
        x = m.fc1(x)
    for _ in range(2):
        x = m.fc2(x)
    return x


def _non_forward() -> tuple[nn.Module, tuple[Any, ...]]:
    inner = Wrap(lambda _, x: x, fc=nn.Linear(10, 1))
    model = Wrap(lambda m, x: m.submod.fc(m.fc(x)), submod=inner, fc=nn.Linear(10, 10))
    return model, (_randn(1, 10),)


def _reuse(shared: bool) -> Callable[[], tuple[nn.Module, tuple[Any, ...]]]:
    def build() -> tuple[nn.Module, tuple[Any, ...]]:
        conv1, conv2 = nn.Conv2d(100, 100, 3), nn.Conv2d(100, 100, 3)
        if shared:
            conv2.weight = conv1.weight
        return Wrap(lambda _, x: x, conv1=conv1, conv2=conv2), ()

    return build


def _vec() -> torch.Tensor:
    return torch.rand(2)


def _self_matmul(x: torch.Tensor) -> torch.Tensor:
    return x @ x


_T = "test_flop_count::"
_J = "test_jit_model_analysis::"
_H = "test_flop_count::TestFlopCountHandles::"
_CONVS = [  # (dim, batch, Cin, Cout, spatial, k, padding, stride, groups): test_conv's nine
    (2, 5, 10, 3, 15, 3, 1, 1, 1),
    (2, 2, 10, 6, 20, 3, 1, 2, 1),
    (2, 5, 16, 8, 15, 5, 2, 1, 4),
    (2, 5, 16, 8, 15, 3, 1, 1, 8),
    (1, 5, 10, 3, 15, 3, 1, 1, 1),
    (3, 5, 10, 3, 15, 3, 1, 1, 1),
]
_DECONVS = [(5, 10, 3, 15, 3, 1, 1, 0), (5, 10, 3, 15, 3, 1, 2, 0), (5, 10, 3, 15, 3, 1, 3, 2)]
_NORM_X = (2, 2, 2, 2)  # the handle tests' input: 16 elements, 2 channels / groups

FACTS: list[Fact] = [
    Fact(_T + "test_nn", _fn(nn.Linear(8, 4), _randn(5, 8)), {"": 5 * 8 * 4}),
    Fact(_T + "test_linear", _fn(nn.Linear(10, 20), _randn(5, 10)), {"": 5 * 10 * 20}),
    Fact(_T + "test_linear", _fn(nn.Linear(10, 20), _randn(5, 5, 10)), {"": 5 * 10 * 5 * 20}),
    *[Fact(_T + "test_conv", _conv(c), {"": _conv_macs(c), "conv": _conv_macs(c)}) for c in _CONVS],
    *[
        # transposed: fvcore's closed form uses the *input* spatial size (batch x Cin x Cout x
        # k^2 x in^2), as the package's ConvTranspose formula does
        Fact(_T + "test_conv", _deconv(*d), {"": d[0] * d[1] * d[2] * d[4] ** 2 * d[3] ** 2})
        for d in _DECONVS
    ],
    Fact(_T + "test_matmul", _fn(torch.matmul, _randn(20, 10), _randn(10, 100)), {"": 20000}),
    *[
        Fact(_T + "test_matmul_broadcast", _fn(torch.matmul, _randn(*a), _randn(*b)), {"": n})
        for a, b, n in [
            ((1, 20, 10), (1, 10, 100), 20 * 10 * 100),
            ((2, 2, 20, 10), (2, 2, 10, 100), 4 * 20 * 10 * 100),
            ((1, 20, 10), (10, 100), 20 * 10 * 100),
            ((2, 20, 10), (10, 100), 2 * 20 * 10 * 100),
        ]
    ],
    Fact(_T + "test_bmm", _fn(torch.bmm, _randn(2, 5, 2), _randn(2, 2, 12)), {"": 2 * 2 * 12 * 5}),
    Fact(
        _T + "test_einsum",
        _fn(lambda x, y: torch.einsum("nct,ncp->ntp", x, y), _randn(1, 5, 2), _randn(1, 5, 12)),
        {"": 1 * 2 * 12 * 5},
    ),
    Fact(
        _T + "test_einsum",
        _fn(lambda x, y: torch.einsum("ntg,ncg->nct", x, y), _randn(1, 2, 6), _randn(1, 5, 6)),
        {"": 1 * 2 * 6 * 5},
    ),
    Fact(
        _T + "test_batchnorm",
        _fn(nn.BatchNorm1d(10, affine=False).eval(), _randn(10, 10)),
        {"": 10 * 10},
        ours=2 * 100,
        why="eval: normalise 2/element x 100 (fvcore: 1/element)",
    ),
    Fact(
        _T + "test_batchnorm",
        _fn(nn.BatchNorm2d(10, affine=False), _randn(10, 10, 5, 5)),
        {"": 4 * 2500},
        ours=6 * 2500 + 4 * 10 + 1,
        why="train: statistics 4 + normalise 2 per element x 2500, running stats 4 x 10 "
        "channels, num_batches_tracked += 1 (fvcore: 4/element)",
        train=True,
    ),
    Fact(
        _T + "test_batchnorm",
        _fn(nn.BatchNorm3d(10, affine=False), _randn(10, 10, 5, 5, 5)),
        {"": 4 * 12500},
        ours=6 * 12500 + 4 * 10 + 1,
        why="train: statistics 4 + normalise 2 per element x 12500, running stats 4 x 10 "
        "channels, num_batches_tracked += 1 (fvcore: 4/element)",
        train=True,
    ),
    Fact(
        _T + "test_threeNet",
        _three_net,
        {
            "": 4000 + 60 + 12 + 2000,
            "conv": 4 * 5 * 2 * 100,
            "linear1": 60,
            "linear2": 12,
            "pool": 2000,
        },
        as_flops=("pool",),
        why="fvcore counts the adaptive average pool at 1 per input element (4 x 5 x 100 = "
        "2000); the package counts it as FLOPs, not MACs (avg pooling: its window, 100, per "
        "output, x 20 outputs = 2000)",
    ),
    Fact(
        _T + "test_scripted_function",
        _fn(lambda x: torch.jit.script(_self_matmul)(x * x), _randn(5, 5)),
        {"": 5 * 5 * 5},
        why="fvcore asserts only that it cannot see inside (prim::CallFunction unsupported); "
        "closed form of x @ x for 5 x 5: 125 MACs",
    ),
    Fact(
        _H + "test_batch_norm",
        _fn(F.batch_norm, torch.rand(*_NORM_X), _vec(), _vec(), _vec(), _vec()),
        {"": 32},
        ours=4 * 16,
        why="eval with weight and bias: normalise 2 + affine 2 per element x 16 (fvcore: 2)",
    ),
    Fact(
        _H + "test_batch_norm",
        _fn(F.batch_norm, torch.rand(*_NORM_X), _vec(), _vec(), None, None),
        {"": 16},
        ours=2 * 16,
        why="eval, no affine: normalise 2 per element x 16 (fvcore: 1)",
    ),
    Fact(
        _H + "test_batch_norm",
        _fn(
            lambda x, mean, var, w, b: F.batch_norm(x, mean, var, w, b, training=True),
            torch.rand(*_NORM_X),
            *(_vec(), _vec(), _vec(), _vec()),
        ),
        {"": 80},
        ours=8 * 16 + 4 * 2,
        why="training: statistics 4 + normalise 2 + affine 2 per element x 16, running stats "
        "4 x 2 channels (fvcore: 5/element)",
    ),
    Fact(
        _H + "test_group_norm",
        _fn(F.group_norm, torch.rand(*_NORM_X), 2, _vec(), _vec()),
        {"": 80},
        ours=8 * 16,
        why="statistics 4 + normalise 2 + affine 2 per element x 16 (fvcore: 5/element)",
    ),
    Fact(
        _H + "test_group_norm",
        _fn(F.group_norm, torch.rand(*_NORM_X), 2, None, None),
        {"": 64},
        ours=6 * 16,
        why="statistics 4 + normalise 2 per element x 16 (fvcore: 4/element)",
    ),
    Fact(
        _H + "test_upsample",
        _fn(lambda x: F.interpolate(x, None, 2, "bilinear", False), torch.rand(*_NORM_X)),
        {"": 2**4 * 4 * 4},
        ours=7 * 64,
        why="bilinear: 4 multiplies + 3 adds per output x 64 outputs (fvcore: 4/output)",
    ),
    Fact(
        _H + "test_complicated_einsum",
        _fn(
            lambda a, b: torch.einsum("nc,nchw->hw", a, b), torch.rand(3, 4), torch.rand(3, 4, 2, 3)
        ),
        {"": 3 * 4 * 2 * 3},
    ),
    Fact(_H + "test_torch_mm", _fn(torch.mm, torch.rand(3, 4), torch.rand(4, 5)), {"": 60}),
    Fact(_H + "test_torch_mm", _fn(torch.matmul, torch.rand(3, 4), torch.rand(4, 5)), {"": 60}),
    Fact(
        _J + "test_by_module",
        lambda: (_nested(), (_randn(1, 4, 5),)),
        # conv 5 positions x 3 x 4 x 4; fc 20 x 10; submod.conv 5 x 1 x 2 x 2; submod.fc 10 x 10
        {"": 560, "conv": 240, "fc": 200, "submod": 120, "submod.conv": 20, "submod.fc": 100},
    ),
    Fact(
        _J + "test_unused_module",
        lambda: (
            Wrap(
                lambda m, x: m.fc2(m.act(m.fc1(x))),
                fc1=nn.Linear(10, 10),
                fc2=nn.Linear(10, 1),
                unused=nn.Linear(20, 20),
                act=nn.ReLU(),
            ),
            (_randn(1, 10),),
        ),
        {"": 110, "fc1": 100, "fc2": 10, "unused": 0},
    ),
    Fact(
        _J + "test_repeated_module",
        lambda: (Wrap(_repeated, fc1=nn.Linear(10, 10), fc2=nn.Linear(10, 10)), (_randn(1, 10),)),
        {"": 500, "fc1": 300, "fc2": 200},
    ),
    Fact(_J + "test_non_forward_func_call", _non_forward, {"": 110, "submod.fc": 10, "submod": 0}),
    Fact(
        _J + "test_shared_module",
        _shared,
        {"": 220, "submod1": 100, "submod2": 100, "submod1.submod": 200, "multiname1": 20},
    ),
    Fact(
        _J + "test_recursive_scope",
        lambda: (Wrap(_recursive, fc=nn.Linear(10, 1)), (_randn(1, 10),)),
        {"": 10, "fc": 10},
    ),
    Fact(
        _J + "test_data_parallel",
        lambda: (nn.DataParallel(_nested()).cpu(), (_randn(1, 4, 5),)),
        {
            "": 560,
            "module": 560,
            "module.conv": 240,
            "module.fc": 200,
            "module.submod": 120,
            "module.submod.conv": 20,
            "module.submod.fc": 100,
        },
    ),
    Fact(
        _J + "test_data_parallel_root_scope",
        lambda: (nn.DataParallel(nn.Linear(10, 10)).cpu(), (_randn(10, 10),)),
        {"": 1000},
    ),
    Fact("test_param_count::test_param", _reuse(False), {}, params={"": 180200, "conv2": 90100}),
    Fact(
        "test_param_count::test_param_with_reuse",
        _reuse(True),
        {},
        params={"": 90200, "conv2": 100},
        why="conv2's weight is conv1's: fvcore gives conv2 its bias only",
    ),
]
NOT_RUNNABLE = {
    _T + "test_customized_ops": "tests fvcore's handle registry (a dummy handle's 10000)",
    _T + "test_skip_ops": "tests fvcore's list of skipped JIT ops",
    _T + "test_autograd_function": "tests fvcore's handle for a Python op (a set 42)",
    _J + "test_unsupported_ops, _changing_handles, _copy, _disable_warnings": "fvcore's "
    "analyzer API (handles, copies, warnings), no count of a model",
    "test_activation_count (3 tests)": "activation counts: no such metric in the package",
    "test_print_model_statistics (10 tests)": "fvcore's table text and its number formatting",
    "test_param_count::test_param_with_same_prefix": "fvcore's table text",
}


def _fvcore_live(model: nn.Module, args: tuple[Any, ...]) -> dict[str, float] | str:
    """fvcore 0.1.5 itself on the same model and inputs: its total and per-module figures."""
    try:
        from fvcore.nn import FlopCountAnalysis

        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            analysis = FlopCountAnalysis(model, args)
            analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
            analysis.tracer_warnings("none")
            return {k: float(v) for k, v in analysis.by_module().items()}
    except Exception as error:  # the peer's failure is information
        return one_line(error)


def _path_macs(report: Any, path: str) -> tuple[float | None, str]:
    """The package's MACs of a module path: the totals for the root (its first call holds the
    others when it re-enters itself), else the sum over that path's calls; no call -> 0."""
    if path == "":
        return report.totals.macs.value, report.totals.macs.status
    records = [r for r in report.layers if r.path == path]
    if not records:
        return 0, "complete"
    statuses = {r.metrics.macs.status for r in records}
    if statuses != {"complete"}:
        return None, "partial"
    return sum(r.metrics.macs.value for r in records), "complete"


def _product_checks(case: Case, fact: Fact, model: nn.Module, args: tuple[Any, ...]) -> None:
    from torchscan_stages import crawl_module, measure_flops

    report = crawl_module(model, args=args)
    extra = 0
    for path in fact.as_flops:
        (record,) = [r for r in report.layers if r.path == path]
        extra += record.metrics.module_flops.value or 0
        case.checks.append(
            compare_figure(
                f"flops:{path}",
                fact.macs[path],
                record.metrics.module_flops.value,
                record.metrics.module_flops.status,
            )
        )
    for path, expected in fact.macs.items():
        if path in fact.as_flops:
            continue
        got, status = _path_macs(report, path)
        if path == "" and got is not None:
            got += extra
        case.checks.append(compare_figure(f"macs:{path or '<root>'}", expected, got, status))
    with torch.no_grad():
        flops = measure_flops(lambda: model(*args))
    products = flops.product_flops
    value = None if products.value is None else products.value / 2 + extra
    case.checks.append(compare_figure("dispatch_macs", fact.macs[""], value, products.status))


def _convention_check(case: Case, fact: Fact, model: nn.Module, args: tuple[Any, ...]) -> None:
    from torchscan_stages import measure_flops

    model.train(fact.train)
    with torch.no_grad():
        report = measure_flops(lambda: model(*args))
    # right when it is the package's documented figure; ``expected`` keeps fvcore's
    check = compare_figure(
        "dispatch_flops", float(fact.ours or 0), report.total.value, report.total.status
    )
    check.expected = fact.macs[""]
    check.note = f"ours {fact.ours}: {fact.why}"
    case.checks.append(check)


def _param_checks(case: Case, fact: Fact, model: nn.Module) -> None:
    from torchscan_stages import crawl_module

    report = crawl_module(model)
    for path, expected in fact.params.items():
        if path == "":
            metric = report.totals.parameters
            case.checks.append(compare_figure("params", expected, metric.value, metric.status))
            continue
        (record,) = [r for r in report.layers if r.path == path]
        own = record.params.parameters - record.params.shared_parameters
        case.checks.append(compare_figure(f"params:{path}", expected, own, "complete"))


def judge_fact(index: int, fact: Fact) -> Case:
    torch.manual_seed(0)
    model, args = fact.build()
    case = Case("fvcore", fact.test, index)
    case.tags = ["recursive"] if fact.test.endswith("test_recursive_scope") else []
    live = _fvcore_live(model, args) if not fact.params else "parameter_count not run"
    try:
        if fact.params:
            _param_checks(case, fact, model)
        elif fact.ours is not None:
            _convention_check(case, fact, model, args)
        else:
            _product_checks(case, fact, model, args)
    except Exception as error:  # the benchmark classifies every failure
        case.verdict, note = classify_error(error, peer_raised=False)
        case.error = f"{one_line(error)} ({note})"
    if isinstance(live, dict):
        peer_total = live.get("", 0.0)
        if fact.macs and peer_total != fact.macs[""]:
            case.error = (case.error + "; " if case.error else "") + (
                f"fvcore now says {peer_total:.0f}, its test {fact.macs['']}"
            )
    elif fact.macs:
        case.error = (case.error + "; " if case.error else "") + f"fvcore now: {live}"
    if fact.why and fact.ours is None:
        for check in case.checks:
            check.note = check.note or fact.why
    return case.finish()


def run_cases() -> list[Case]:
    """Every fact, then the fvcore tests that cannot run against the package (with why)."""
    cases = [judge_fact(i, fact) for i, fact in enumerate(FACTS)]
    for test, reason in NOT_RUNNABLE.items():
        cases.append(Case("fvcore", test, 0, error=reason, verdict="not_runnable"))
    return cases
