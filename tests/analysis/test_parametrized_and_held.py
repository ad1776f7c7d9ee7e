"""Weight-norm (torch parametrisations): one record per parametrised module with the
parametrisation's cost under it; summary's inclusive Params cells count every parameter of
the subtree, called or not."""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrizations

from torchscan_stages import crawl_module, summary


def _weight_normed() -> nn.Module:
    return nn.Sequential(parametrizations.weight_norm(nn.Conv1d(2, 3, 3)), nn.ReLU())


def test_weight_norm_is_one_record_with_its_cost_under_it() -> None:
    report = crawl_module(_weight_normed(), (2, 10))
    assert [r.path for r in report.layers] == ["", "0", "1"]  # no parametrisation records
    conv = report.layers[1]
    # own parameters: g (3) + v (3 x 2 x 3 = 18) + bias 3 = 24, as the model total
    assert conv.params.parameters == report.totals.parameters.value == 24
    m = conv.metrics
    # Conv1d(2 -> 3, k3) on 10 -> 8 positions: 3 x 8 x 2 x 3 = 144 MACs, 2 x 144 + 24 bias
    # adds = 312 FLOPs; weight norm of v (n = 18 in s = 3 slices): 3n + 2s = 60 -> 372
    assert (m.macs.value, m.module_flops.value) == (144, 372)
    # DMAs: x 20 + bias 3 + y 24 = 47; weight norm: v and g read, w written and read by the
    # conv: 3n + s = 57 -> 104
    assert m.dmas.value == 104
    assert m.module_flops.is_complete and m.macs.is_complete
    # the weight-norm operator runs inside the conv's call: its operators are the conv's own
    assert conv.operator_flops is not None
    assert conv.operator_flops.own.value == report.totals.operator_flops.value - 24  # - ReLU


def test_an_unknown_parametrisation_leaves_a_named_lower_bound() -> None:
    class Doubled(nn.Module):
        def forward(self, weight: torch.Tensor) -> torch.Tensor:
            return 2 * weight

    linear = nn.Linear(4, 2)
    nn.utils.parametrize.register_parametrization(linear, "weight", Doubled())
    report = crawl_module(nn.Sequential(linear), (4,))
    record = next(r for r in report.layers if r.path == "0")
    assert record.metrics.module_flops.status == "partial"
    assert record.metrics.macs.known_value == 4 * 2  # the Linear's own 8 multiply-adds
    note = next(d for d in report.diagnostics if d.code == "parametrization_uncounted")
    assert note.path == "0" and "Doubled" in note.message


class _UsesChildWeight(nn.Module):
    """A forward that reads a child's weight without calling the child (as Mamba2's mixer
    reads conv1d.weight): the child has no record, its parameters still belong here."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.side = nn.Linear(4, 3)  # 12 + 3 = 15 parameters, never called

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x) @ self.side.weight.t()


@pytest.mark.parametrize("model", [_UsesChildWeight, _weight_normed])
def test_summary_inclusive_params_count_every_parameter(model: type[nn.Module]) -> None:
    module = model()
    shape = (4,) if model is _UsesChildWeight else (2, 10)
    out = io.StringIO()
    report = summary(module, shape, file=out)
    total = sum(p.numel() for p in module.parameters())
    assert report.totals.parameters.value == total
    header, root = out.getvalue().splitlines()[1], out.getvalue().splitlines()[3]
    column = header.index("Params") + len("Params")
    # the root's inclusive cell: every parameter (proj 20 + side 15 = 35; weight-normed 24)
    assert root[:column].split()[-1] == str(total) == {_UsesChildWeight: "35"}.get(model, "24")
