"""Per-layer operator FLOPs in crawl records, and fill_from_operators."""

from __future__ import annotations

import torch
from torch import nn

from torchscan_stages import crawl_module


class Scale(nn.Module):
    """Own arithmetic and no handler: x * 2 then a sum over the last dim."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 2).sum(-1, keepdim=True)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 6)
        self.scale = Scale()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale(self.linear(x)) + 1  # the + 1 is the block's own operator


def test_records_carry_own_and_inclusive_operator_flops() -> None:
    report = crawl_module(Block(), (3, 4))
    layers = {layer.path: layer.operator_flops for layer in report.layers}
    linear, scale, root = layers["linear"], layers["scale"], layers[""]
    assert linear is not None and scale is not None and root is not None
    # addmm on 3 rows: 2*3*4*6 = 144, all of it a tensor product (bias adds not counted)
    assert linear.own.value == linear.inclusive.value == linear.own_products.value == 144
    # mul 3*6 = 18 + sum 3*6 = 18 (1 per input element) -> 36, no products
    assert scale.own.value == 36 and scale.own_products.value == 0
    # the block's own add: 3 elements; inclusive 144 + 36 + 3 = 183
    assert root.own.value == 3 and root.inclusive.value == 183
    assert root.inclusive_products.value == 144
    assert report.totals.operator_flops.value == 183
    assert all(layer.operator_flops.own.method == "operator_dispatch" for layer in report.layers)  # type: ignore[union-attr]


def test_structure_mode_has_no_operator_flops() -> None:
    report = crawl_module(Block(), (3, 4), mode="structure")
    assert all(layer.operator_flops is None for layer in report.layers)


def test_fill_from_operators_names_its_method_and_modules() -> None:
    plain = crawl_module(Block(), (3, 4))
    assert plain.totals.module_flops.status == "partial"  # Scale and the block's add
    report = crawl_module(Block(), (3, 4), fill_from_operators=[Scale, Block])
    scale = next(layer for layer in report.layers if layer.path == "scale")
    assert scale.metrics.module_flops.value == 36  # its own operators: 18 + 18
    assert scale.metrics.module_flops.method == "operator_fill"
    assert scale.metrics.macs.value == 0  # no tensor product in its own forward
    assert scale.metrics.dmas.status == "unavailable"
    total = report.totals.module_flops
    # Linear formula 2*3*4*6 + 18 bias adds = 162, + filled 36 + filled 3 = 201
    assert total.value == 201 and total.method == "module_formula+operator_fill"
    fill = [d for d in report.diagnostics if d.code == "operator_fill"]
    assert len(fill) == 1 and fill[0].count == 2 and "scale" in fill[0].message


def test_fill_leaves_handled_modules_to_their_formula() -> None:
    report = crawl_module(nn.Sequential(nn.Linear(4, 4)), (4,), fill_from_operators=True)
    assert report.totals.module_flops.method == "module_formula"
    assert not any(d.code == "operator_fill" for d in report.diagnostics)


class Gated(nn.Module):
    """A gated MLP's own work: act(g) * u, an element-wise product with nothing to add."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Linear(4, 8, bias=False)
        self.up = nn.Linear(4, 8, bias=False)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.gate(x)) * self.up(x)


class Affine(nn.Module):
    """x * g + b in the module's own forward, outside any norm (no tensor product)."""

    def __init__(self) -> None:
        super().__init__()
        self.g = nn.Parameter(torch.ones(4))
        self.b = nn.Parameter(torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.g + self.b


def test_elementwise_product_without_accumulation_has_no_macs() -> None:
    report = crawl_module(Gated(), (4,))
    # gate and up: 2 x (4*8) MACs = 64; the gating product adds no MAC
    assert report.totals.macs.status == "complete" and report.totals.macs.value == 64
    assert report.totals.module_flops.status == "partial"  # its 8 multiplies have no formula


def test_multiply_beside_an_add_outside_a_norm_is_no_mac() -> None:
    report = crawl_module(Affine(), (4,))
    # no tensor product among its own operators: 0 MACs read from them (operator_fill); the
    # 8 element-wise FLOPs have no module formula
    assert (report.totals.macs.status, report.totals.macs.value) == ("complete", 0)
    assert report.totals.macs.method == "operator_fill"
    assert report.totals.module_flops.status == "unavailable"
