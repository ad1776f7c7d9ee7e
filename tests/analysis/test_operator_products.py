"""product_flops: the tensor-product share of an operator count (FlopCounterMode's convention).

Each expected number is derived beside it; where torch's FlopCounterMode counts the same work
the two are compared directly.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode, flop_registry, register_flop_formula

from torchscan_stages import FlopReport, load_report
from torchscan_stages.analysis.operator_formulas import FORMULAS, PRODUCT_SHARE, Flops
from torchscan_stages.analysis.operators import OperatorCounter, measure_flops

aten = torch.ops.aten


def _reference(fn) -> int:
    """FlopCounterMode's total with the CPU fast paths off (as the benchmarks' reference)."""
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # oneDNN's TF32 notice when its flags are toggled
        return _counted(fn)


def _counted(fn) -> int:
    with (
        torch.backends.mkldnn.flags(enabled=False),
        torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH),
        FlopCounterMode(display=False) as mode,
    ):
        fn()
    return mode.get_total_flops()


@pytest.mark.parametrize(
    ("op", "args"),
    [
        (aten.mm, (torch.randn(3, 5), torch.randn(5, 7))),
        (aten.addmm, (torch.randn(7), torch.randn(3, 5), torch.randn(5, 7))),
        (aten.bmm, (torch.randn(2, 3, 5), torch.randn(2, 5, 4))),
        (aten.baddbmm, (torch.randn(2, 3, 4), torch.randn(2, 3, 5), torch.randn(2, 5, 4))),
        (  # conv2d, stride 2, groups 2
            aten.convolution,
            (
                torch.randn(1, 4, 9, 9),
                torch.randn(6, 2, 3, 3),
                None,
                [2, 2],
                [1, 1],
                [1, 1],
                False,
                [0, 0],
                2,
            ),
        ),
        (  # transposed conv1d
            aten.convolution,
            (torch.randn(2, 4, 7), torch.randn(4, 3, 3), None, [2], [0], [1], True, [1], 1),
        ),
        (
            aten._convolution,
            (
                torch.randn(1, 3, 8, 8),
                torch.randn(5, 3, 3, 3),
                None,
                [1, 1],
                [0, 0],
                [1, 1],
                False,
                [0, 0],
                1,
                False,
                False,
                True,
                True,
            ),
        ),
    ],
)
def test_own_matmul_formulas_agree_with_torch(op, args) -> None:
    out = op(*args)
    ours = FORMULAS[op](args, {}, out)
    theirs = flop_registry[op](*args, out_val=out)
    assert ours == theirs
    assert PRODUCT_SHARE[op] == "all"


def test_mlp_products_equal_flop_counter_mode() -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.LayerNorm(16), nn.Linear(16, 4)).eval()
    x = torch.randn(5, 8)

    def forward() -> None:
        with torch.no_grad():
            model(x)

    report = measure_flops(forward)
    products = 2 * 5 * 8 * 16 + 2 * 5 * 16 * 4  # two addmm: 1280 + 640 = 1920
    assert report.product_flops is not None
    assert report.product_flops.status == "complete"
    assert report.product_flops.value == products == _reference(forward)
    # the total adds the relu (80) and the layer norm (5*16 elements * 8 = 640)
    assert report.total.value == products + 80 + 640
    assert "products" in report.conventions


def test_attention_split_keeps_products_apart_from_softmax() -> None:
    q = torch.randn(1, 2, 6, 4)
    k = torch.randn(1, 2, 5, 4)
    v = torch.randn(1, 2, 5, 4)
    report = measure_flops(lambda: F.scaled_dot_product_attention(q, k, v))
    scores = 1 * 2 * 6 * 5  # 60
    products = 2 * scores * 4 + 2 * scores * 4  # q@k^T and scores@v: 960 + 960
    scaling = 1 * 2 * 6 * 4 + 1 * 2 * 5 * 4  # q and k scaled: 48 + 40
    assert report.product_flops is not None and report.product_flops.value == products
    assert report.total.value == products + scaling + 5 * scores  # softmax 5 per score
    assert report.product_flops.value == _reference(lambda: F.scaled_dot_product_attention(q, k, v))


def test_lstm_fused_layer_products_equal_the_decomposed_reference() -> None:
    lstm = nn.LSTM(6, 5, batch_first=True).eval()
    x = torch.randn(2, 3, 6)

    def forward() -> None:
        with torch.no_grad():
            lstm(x)

    report = measure_flops(forward)
    rows, gates = 2 * 3, 4 * 5
    products = rows * (2 * 6 * gates + 2 * 5 * gates)  # 6 * (240 + 200) = 2640
    assert report.product_flops is not None and report.product_flops.value == products
    assert _reference(forward) == products  # oneDNN off: addmm per step, same products
    assert report.total.value is not None and report.total.value > products


def test_custom_formula_share_is_unknown_so_products_are_a_lower_bound() -> None:
    a = torch.randn(3, 5)
    b = torch.randn(5, 2)

    def workload() -> None:
        a @ b  # mm by a custom formula: 7
        a.relu()  # 15 elements, no products

    report = measure_flops(workload, custom_mapping={aten.mm: lambda *s, **k: 7})
    assert report.total.status == "complete" and report.total.value == 7 + 15
    assert report.product_flops is not None and report.product_flops.status == "partial"
    assert report.product_flops.known_value == 0
    (diagnostic,) = [d for d in report.diagnostics if d.code == "unclassified_operator"]
    assert diagnostic.operator == "aten.mm" and diagnostic.metric == "product_flops"


def test_custom_formula_that_returns_flops_declares_its_share() -> None:
    a = torch.randn(3, 5)
    b = torch.randn(5, 2)

    def mm_formula(a_shape, b_shape, *, out_shape=None, **kwargs) -> Flops:
        # FlopCounterMode's shape contract; the return value declares the share
        m, k = a_shape
        return Flops(products=2 * m * k * b_shape[1], other=1)

    def workload() -> None:
        a @ b  # 2 * 3 * 5 * 2 = 60 products + 1 other by the custom formula
        a.relu()  # 15 elements, no products

    report = measure_flops(workload, custom_mapping={aten.mm: mm_formula})
    assert report.total.status == "complete" and report.total.value == 60 + 1 + 15
    assert report.product_flops is not None and report.product_flops.status == "complete"
    assert report.product_flops.value == 60
    assert not [d for d in report.diagnostics if d.code == "unclassified_operator"]


def test_custom_overload_formula_returning_flops_and_broken_flops() -> None:
    x = torch.randn(4, 4)
    # overload key, all products: 2 * 4 * 4 * 4 = 128
    mapping = {aten.mm.default: lambda a, b, *, out_shape=None: Flops(128, 0)}
    report = measure_flops(lambda: x @ x, custom_mapping=mapping)
    assert report.product_flops is not None and report.product_flops.value == 128
    assert report.product_flops.status == "complete"
    # a negative part is a broken formula: uncounted, never a silent number
    mapping = {aten.mm: lambda a, b, *, out_shape=None: Flops(128, -1)}
    report = measure_flops(lambda: x @ x, custom_mapping=mapping)
    assert report.total.status == "partial" and report.total.known_value == 0
    (diagnostic,) = [d for d in report.diagnostics if d.code == "uncounted_operator"]
    assert "negative FLOPs" in diagnostic.message


def test_uncounted_operator_leaves_products_partial() -> None:
    spd = torch.eye(4) * 2

    def workload() -> None:
        torch.linalg.cholesky(spd)
        spd @ spd  # 2*4*4*4 = 128

    report = measure_flops(workload)
    assert report.product_flops is not None
    assert report.product_flops.status == "partial" and report.product_flops.known_value == 128


def _counter_replacing(packet: Any, formula: Any) -> OperatorCounter:
    """A counter whose built-in formula for ``packet`` is ``formula`` (share unchanged): its
    own copy of the table and no classifications shared with other counters."""
    counter = OperatorCounter()
    counter._table = {**counter._table, packet: formula}
    counter._entries, counter._funcs = {}, []
    return counter


def test_split_formula_that_returns_an_int_is_uncounted() -> None:
    packet = aten._scaled_dot_product_flash_attention_for_cpu
    assert PRODUCT_SHARE[packet] == "split"
    counter = _counter_replacing(packet, lambda args, kwargs, out: 10)
    q = torch.randn(1, 1, 3, 2)
    with counter:
        F.scaled_dot_product_attention(q, q, q)
    report = counter.report()
    assert report.total.status == "partial"
    (diagnostic,) = [d for d in report.diagnostics if d.operator == str(packet)]
    assert "expected Flops" in diagnostic.message


def test_flops_split_arithmetic() -> None:
    assert Flops(3, 4) + Flops(10, 20) == Flops(13, 24)
    assert Flops(3, 4).total == 7


def test_every_split_formula_is_registered_and_shares_are_valid() -> None:
    assert set(PRODUCT_SHARE) <= set(FORMULAS)
    assert set(PRODUCT_SHARE.values()) <= {"all", "split"}


def test_product_flops_round_trips_and_older_reports_load() -> None:
    report = measure_flops(lambda: torch.randn(2, 3) @ torch.randn(3, 4))
    again = load_report(report.model_dump_json())
    assert again == report and again.product_flops == report.product_flops
    older = report.model_dump(mode="json")
    del older["product_flops"]
    loaded = FlopReport.model_validate(older)
    assert loaded.product_flops is None  # not recorded, never a made-up zero


def test_formula_registered_with_torch_later_wins_and_has_unknown_share() -> None:
    @torch.library.custom_op("tsst_products::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    packet = torch.ops.tsst_products.twice
    x = torch.ones(6)
    before = measure_flops(lambda: twice(x))  # cached tables built without the formula
    assert before.total.status == "partial"
    register_flop_formula(packet)(lambda x_shape, out_shape=None, **kwargs: 6)
    try:
        report = measure_flops(lambda: twice(x))
    finally:
        del flop_registry[packet]
    assert report.total.status == "complete" and report.total.value == 6
    assert report.product_flops is not None and report.product_flops.status == "partial"
    (diagnostic,) = [d for d in report.diagnostics if d.code == "unclassified_operator"]
    assert "register_flop_formula" in diagnostic.message


def test_package_formula_registered_after_a_count_is_seen() -> None:
    @torch.library.custom_op("tsst_products::halve", mutates_args=())
    def halve(x: torch.Tensor) -> torch.Tensor:
        return x / 2

    x = torch.ones(5)
    assert measure_flops(lambda: halve(x)).total.status == "partial"
    torch_packet = torch.ops.tsst_products.halve
    FORMULAS[torch_packet] = lambda args, kwargs, out: out.numel()  # what a family file does
    try:
        report = measure_flops(lambda: halve(x))
    finally:
        del FORMULAS[torch_packet]
    assert report.total.status == "complete" and report.total.value == 5  # 1 per element
    assert report.product_flops is not None and report.product_flops.value == 0


def test_split_formula_with_negative_part_is_uncounted() -> None:
    packet = aten._scaled_dot_product_flash_attention_for_cpu
    counter = _counter_replacing(packet, lambda args, kwargs, out: Flops(10, -5))
    q = torch.randn(1, 1, 3, 2)
    with counter:
        F.scaled_dot_product_attention(q, q, q)
    report = counter.report()
    assert report.total.status == "partial"
    assert report.product_flops is not None and report.product_flops.status == "partial"
    (diagnostic,) = [d for d in report.diagnostics if d.operator == str(packet)]
    assert "negative FLOPs" in diagnostic.message


def _kernel_args(packet, q, k, v, *, dropout: float, bias) -> tuple:
    """Positional arguments for an SDPA kernel, by its schema; placeholders where only the
    kernel (never a formula) reads them."""
    values = {
        "grad_out": torch.ones_like(q),
        "grad_out_": torch.ones_like(q),
        "query": q,
        "key": k,
        "value": v,
        "out": torch.ones_like(q),
        "logsumexp": torch.ones(q.shape[:3]),
        "attn_bias": bias,
        "dropout_p": dropout,
    }
    return tuple(values.get(a.name) for a in packet.default._schema.arguments)


@pytest.mark.parametrize("kernel", ["flash", "efficient", "cudnn"])
@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_accelerator_sdpa_kernels_count_as_the_cpu_kernel(kernel, backward, dropout) -> None:
    name = f"_scaled_dot_product_{kernel}_attention" + ("_backward" if backward else "")
    packet = getattr(aten, name)
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 5, 8)  # b=2, h=4, s_q=6, s_k=5, d=8
    args = _kernel_args(packet, q, k, k, dropout=dropout, bias=None)
    ours = FORMULAS[packet](args, {}, None)
    # the two (forward) or five (backward) products, exactly as torch's formula counts them
    assert ours.products == flop_registry[packet](*args, out_val=None)
    cpu = aten._scaled_dot_product_flash_attention_for_cpu
    if backward:
        cpu = aten._scaled_dot_product_flash_attention_for_cpu_backward
        cpu_args = (torch.ones_like(q), q, k, k, torch.ones_like(q), None, dropout)
    else:
        cpu_args = (q, k, k, dropout)
    assert ours == FORMULAS[cpu](cpu_args, {}, None)  # same total and split on every device
    scores = 2 * 4 * 6 * 5  # 240
    softmax = 4 if backward else 5
    assert ours.other == 2 * 4 * 6 * 8 + 2 * 4 * 5 * 8 + scores * (softmax + int(dropout > 0))


def test_memory_efficient_kernel_counts_its_additive_mask() -> None:
    packet = aten._scaled_dot_product_efficient_attention
    q = torch.randn(1, 2, 3, 4)
    plain = FORMULAS[packet](_kernel_args(packet, q, q, q, dropout=0.0, bias=None), {}, None)
    bias = torch.zeros(1, 2, 3, 3)
    masked = FORMULAS[packet](_kernel_args(packet, q, q, q, dropout=0.0, bias=bias), {}, None)
    assert masked.total - plain.total == 1 * 2 * 3 * 3  # one add per score
