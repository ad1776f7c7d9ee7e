"""MoE routing operators: grouped products, sort, top-k, histograms, scatter/index adds.

Each expected count is written beside its arithmetic; the conventions are the docstrings of
operator_formulas/matmul.py (grouped mm) and operator_formulas/sorting.py.
"""

from __future__ import annotations

import pytest
import torch

from torchscan_stages.analysis.operator_formulas.matmul import grouped_mm_flops
from torchscan_stages.analysis.operator_formulas.sorting import sort_flops
from torchscan_stages.analysis.operators import OperatorCounter


def _counted(fn) -> tuple[int, int, dict[str, int]]:
    """(total, products, calls per operator) of ``fn()``; the count must be complete."""
    with OperatorCounter() as counter:
        fn()
    report = counter.report()
    assert report.total.is_complete, report.diagnostics
    assert report.product_flops is not None and report.product_flops.is_complete
    calls = {op: count.calls for op, count in report.by_operator.items()}
    return report.total.value, report.product_flops.value, calls


def _grouped_weight(g: int, k: int, n: int) -> torch.Tensor:
    return torch.randn(g, n, k).transpose(-2, -1)  # the kernel wants 16-byte aligned strides


def test_grouped_mm_2d_by_3d_counts_rows_inside_the_offsets() -> None:
    a = torch.randn(10, 8)  # 10 token rows, K = 8
    b = _grouped_weight(3, 8, 4)  # 3 experts of 8 -> 4
    offs = torch.tensor([3, 5, 8], dtype=torch.int32)  # rows 8 and 9 belong to no group
    total, products, _ = _counted(lambda: torch._grouped_mm(a, b, offs=offs))
    assert total == products == 2 * 8 * 8 * 4  # 2 * used rows 8 * K 8 * N 4 = 512


def test_grouped_mm_other_layouts() -> None:
    offs = torch.tensor([4, 8, 12], dtype=torch.int32)
    # 3d x 2d: (G3, M8, K4) x (K4, 12 columns split by offs): 2 * 8 * 4 * 12 = 768
    total, _, _ = _counted(
        lambda: torch._grouped_mm(torch.randn(3, 8, 4), torch.randn(12, 4).t(), offs=offs)
    )
    assert total == 768
    # 2d x 2d (a weight gradient): (M8, T12) x (T12, N4), contraction split: 2 * 8 * 12 * 4
    total, _, _ = _counted(
        lambda: torch._grouped_mm(torch.randn(8, 12), torch.randn(4, 12).t(), offs=offs)
    )
    assert total == 768
    # shapes only, 3d x 3d: 2 * G3 * M8 * K4 * N16 = 3072
    assert grouped_mm_flops((3, 8, 4), (3, 4, 16)) == 3072


def test_grouped_mm_backward_counts_both_gradients() -> None:
    a = torch.randn(8, 8, requires_grad=True)
    b = _grouped_weight(2, 8, 4).requires_grad_()
    offs = torch.tensor([5, 8], dtype=torch.int32)

    def step() -> None:
        torch._grouped_mm(a, b, offs=offs).backward(torch.ones(8, 4))

    total, products, calls = _counted(step)
    # forward 2 * 8 * 8 * 4 = 512; grad_a (8x4)x(G,4,8) = 512; grad_b (8x8)^T x (8x4) = 512
    assert calls["aten._grouped_mm"] == 3
    assert products == 3 * 512
    assert total == products  # the rest of the backward is views and allocation


@pytest.mark.parametrize(
    ("x_shape", "dim", "expected"),
    [
        ((4, 8), -1, 4 * 8 * 3),  # 4 rows of n=8: 8 * ceil(log2 8)=3 each -> 96
        ((4, 5), 0, 5 * 4 * 2),  # 5 columns of n=4: 4 * 2 each -> 40
        ((3, 5), 1, 3 * 5 * 3),  # n=5: ceil(log2 5) = 3 -> 45
        ((7, 1), 1, 0),  # slices of one element need no comparison
        ((), 0, 0),
    ],
)
def test_sort_flops(x_shape, dim, expected) -> None:
    assert sort_flops(x_shape, dim) == expected


def test_sort_argsort_msort_topk_dispatch() -> None:
    x = torch.randn(4, 8)
    # sort rows: 96 (above); argsort along dim 0 (8 columns of n=4: 4 * 2 each): 64
    # msort = sort along dim 0: 64; stable sort keyword overload, rows: 96
    total, _, calls = _counted(
        lambda: (
            torch.sort(x),
            torch.argsort(x, dim=0),
            torch.msort(x),
            torch.sort(x, stable=True),
        )
    )
    assert total == 96 + 64 + 64 + 96
    assert calls["aten.sort"] >= 2
    # topk: 1 comparison per input element, whatever k: 32
    total, products, _ = _counted(lambda: torch.topk(x, 3, dim=-1))
    assert (total, products) == (32, 0)


def test_histograms_and_scatter_adds() -> None:
    ids = torch.tensor([0, 2, 2, 1, 3, 3, 3])  # 7 elements
    weights = torch.ones(7)
    # histc: 1 increment per element: 7; bincount 7; weighted bincount still one add: 7
    total, _, _ = _counted(lambda: torch.histc(ids.float(), bins=4, min=0, max=3))
    assert total == 7
    total, _, _ = _counted(lambda: (torch.bincount(ids), torch.bincount(ids, weights=weights)))
    assert total == 14
    target = torch.zeros(4, 3)
    src = torch.ones(7, 3)  # 21 source elements -> 21 adds each
    total, _, calls = _counted(
        lambda: (
            target.index_add(0, ids, src),
            target.clone().index_add_(0, ids, src, alpha=2.0),  # the alpha scale: not counted
            target.scatter_add(0, ids[:, None].expand(7, 3), src),
        )
    )
    assert total == 3 * 21
    assert calls["aten.index_add"] == 1 and calls["aten.scatter_add"] == 1


def test_accumulating_writes_count_and_plain_writes_are_free() -> None:
    x = torch.zeros(5, 3)
    rows = torch.tensor([0, 1, 1, 4])
    mask = torch.tensor([True, False, True, False, False])
    index = torch.zeros(2, 3, dtype=torch.long)
    total, _, calls = _counted(
        lambda: (
            x.index_put((rows,), torch.ones(3), accumulate=True),  # 4 rows x 3 = 12 adds
            x.index_put((rows,), torch.ones(3)),  # a plain assignment copies: 0
            # None keeps dim 0 (5), 2 columns picked, a broadcast scalar value: 5 * 2 = 10
            torch.ops.aten.index_put.default(x, [None, torch.tensor([0, 2])], torch.ones(1), True),
            x.index_put((mask,), torch.ones(3), accumulate=True),  # 2 masked rows x 3 = 6
            x.scatter(0, index, 2.0, reduce="add"),  # one add per index element: 6
            x.scatter(0, index, torch.ones(2, 3)),  # plain scatter copies: 0
        )
    )
    assert total == 12 + 10 + 6 + 6
    assert calls == {"aten.index_put": 4, "aten.scatter": 2}


def test_indexing_backward_accumulates() -> None:
    a = torch.randn(5, 3, requires_grad=True)
    rows = torch.tensor([0, 1, 1, 4])
    # forward: sum of 4 x 3 gathered = 12; backward: index_put(accumulate) of 12 grads = 12
    total, _, calls = _counted(lambda: a[rows].sum().backward())
    assert total == 24 and calls["aten.index_put"] == 1


def test_scaled_grouped_mm_formula_reads_offsets_at_its_own_position() -> None:
    """The fp8 kernel needs a GPU; its formula is called here with the kernel's signature
    (self, mat2, scale_a, scale_b, offs, ...)."""
    from torchscan_stages.analysis.operator_formulas import FORMULAS

    formula = FORMULAS[torch.ops.aten._scaled_grouped_mm]
    a, b = torch.empty(10, 16), torch.empty(3, 16, 8)
    scales = torch.ones(10), torch.ones(3, 8)
    offs = torch.tensor([2, 6, 9], dtype=torch.int32)
    # 2 * used rows 9 * K 16 * N 8 = 2304 (the scales are not counted)
    assert formula((a, b, *scales, offs), {}, None) == 2304
    assert formula((a, b, *scales), {"offs": offs}, None) == 2304
    assert formula((a, b, *scales), {}, None) == 2 * 10 * 16 * 8  # no offsets: every row


def test_isin_counts_one_comparison_per_pair() -> None:
    """generate's end-of-sequence check: every element against every test element."""
    ids = torch.tensor([[3, 1], [0, 2], [1, 1]])  # 6 elements
    eos = torch.tensor([1, 2])  # 2 test elements
    total, products, calls = _counted(lambda: torch.isin(ids, eos))
    assert (total, products) == (6 * 2, 0)  # 12 comparisons, no products
    assert calls == {"aten.isin": 1}
    # scalar overloads: 6 elements x 1 test element; 1 element x 2 test elements
    assert _counted(lambda: torch.isin(ids, 1))[0] == 6
    assert _counted(lambda: torch.isin(1, eos))[0] == 2
    # invert flips the answer at no further comparison: 6 * 2 = 12
    assert _counted(lambda: torch.isin(ids, eos, invert=True))[0] == 12


def test_triangular_solves_count_n_squared_per_solution_column() -> None:
    """Linear attention's chunk inversion (gated delta rule): substitution, n^2 per column."""
    a = torch.tril(torch.rand(3, 4, 4)) + torch.eye(4)  # 3 lower triangles of n = 4
    b = torch.rand(3, 4, 5)  # 5 columns each
    # 3 batches x 5 columns x 4^2 = 240; a unit diagonal divides by nothing: 3 x 5 x 4 x 3
    assert _counted(lambda: torch.linalg.solve_triangular(a, b, upper=False))[:2] == (240, 0)
    unit = _counted(lambda: torch.linalg.solve_triangular(a, b, upper=False, unitriangular=True))
    assert unit[0] == 180
    # X A = B (left=False), B as (3, 5, 4): 3 batches x 5 rows x 4^2 = 240
    right = _counted(
        lambda: torch.linalg.solve_triangular(a, b.transpose(1, 2), upper=False, left=False)
    )
    assert right[0] == 240
    # the older triangular_solve(B, A) (deprecated: torch warns): solution 3 x 4 x 5, n = 4
    with pytest.warns(UserWarning, match="deprecated"):
        assert _counted(lambda: torch.triangular_solve(b, a, upper=False))[0] == 240
