"""Cases from the peers' own suites (fvcore, torchinfo) the crawl once got wrong or refused.

Each expected number is worked out by hand beside its assertion.
"""

from __future__ import annotations

import dataclasses
import json
from collections import namedtuple
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical, Normal
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from torchscan_stages import crawl_module, load_report, summary
from torchscan_stages.render.analysis_view import build_tree
from torchscan_stages.report import report_text


class RecursiveScopeNet(nn.Module):
    """fvcore's ``test_recursive_scope`` model: the root calls itself three times, then fc."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(10, 1)

    def forward(self, x: torch.Tensor, count: int = 3) -> torch.Tensor:
        if count > 0:
            return self(x, count - 1)
        return self.fc(x)


class RecursiveChild(nn.Module):
    """A child that re-enters itself (twice) beside a plain sibling."""

    def __init__(self) -> None:
        super().__init__()
        self.block = RecursiveScopeNet()
        self.head = nn.Linear(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(x, 2))


def test_fvcore_recursive_scope_is_one_record_per_call_nested() -> None:
    report = crawl_module(RecursiveScopeNet(), args=(torch.randn(1, 10),))
    calls = [(layer.path, layer.call_index, layer.depth) for layer in report.layers]
    # the root's four calls, each one level inside the last; fc inside the innermost
    assert calls == [("", 0, 0), ("", 1, 1), ("", 2, 2), ("", 3, 3), ("fc", 0, 4)]
    # fvcore: total() == total("fc") == 10 MACs (Linear 10 -> 1, batch 1: 10 * 1)
    assert report.totals.macs.value == 10 and report.totals.macs.is_complete
    # module FLOPs: 2 * 10 MACs + 1 bias add = 21, counted once (not 4 * 21 = 84)
    assert report.totals.module_flops.value == 21
    assert report.totals.operator_flops.value == 20  # addmm: 2 * 1 * 10 * 1
    tree = build_tree(report.layers)
    assert len(tree) == 1  # one root call; the others nested in it
    node, chain = tree[0], []
    while node.children:
        (node,) = node.children
        chain.append((node.record.path, node.record.call_index))
    assert chain == [("", 1), ("", 2), ("", 3), ("fc", 0)]
    assert load_report(report_text(report)) == report  # compact form: same consistency rules
    assert load_report(report.model_dump_json()) == report


def test_a_recursive_child_nests_under_its_own_first_call() -> None:
    report = crawl_module(RecursiveChild(), args=(torch.randn(1, 10),))
    calls = [(layer.path, layer.call_index, layer.depth) for layer in report.layers]
    assert calls == [
        ("", 0, 0),
        ("block", 0, 1),
        ("block", 1, 2),
        ("block", 2, 3),
        ("block.fc", 0, 4),
        ("head", 0, 1),  # after the re-entries: its path depth again
    ]
    # block.fc 10 MACs + head 1 * 2 = 12 MACs; FLOPs 21 + (2 * 2 + 2 bias) = 27
    assert (report.totals.macs.value, report.totals.module_flops.value) == (12, 27)


def test_a_root_record_re_entered_at_depth_zero_is_still_summed() -> None:
    """Editing a nested root call back to depth 0 makes it a second root: its sum no longer
    matches the totals, and loading says so."""
    report = crawl_module(RecursiveScopeNet(), args=(torch.randn(1, 10),))
    document = json.loads(report.model_dump_json())
    document["layers"][1]["depth"] = 0
    # 21 + 21: the first two root calls
    with pytest.raises(ValueError, match=r"module_flops: 21 contradicts .*, which sum to 42"):
        load_report(json.dumps(document))
    document = json.loads(report.model_dump_json())
    document["layers"][0]["call_index"] = 7  # no first root call left: nothing would be summed
    with pytest.raises(ValueError, match=r"calls of the root module without its first"):
        load_report(json.dumps(document))


class PackedLSTM(nn.Module):
    """The usual packed-sequence model: pack, LSTM, pad back (lengths sorted, the default)."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 3, batch_first=True)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(x, lengths, batch_first=True)
        out, _ = self.lstm(packed)
        return pad_packed_sequence(out, batch_first=True)[0]


def test_packed_sequences_are_data_movement_and_the_lstm_stays_counted() -> None:
    report = crawl_module(PackedLSTM(), args=(torch.randn(2, 5, 4), torch.tensor([5, 3])))
    ignored = {op.operator: op.reason for op in report.operator_flops.ignored_operators}
    assert ignored["aten._pack_padded_sequence"].startswith("data movement")
    assert not [d for d in report.diagnostics if d.code == "uncounted_operator"]
    # 5 + 3 = 8 packed steps; per step 4 gates x 3 hidden x (4 in + 3 recurrent) = 84 MACs
    lstm = report.layers[1]
    assert lstm.metrics.macs.value == 8 * 84 and lstm.metrics.macs.is_complete
    # FLOPs per step: 2 * 84 + 2 * 4 * 3 bias adds + 22 * 3 element-wise = 258; x 8 = 2064
    assert lstm.metrics.module_flops.value == 2064
    assert report.totals.module_flops.value == 2064 and report.totals.module_flops.is_complete
    # operator FLOPs, all the LSTM's (the pack and pad add none, nor does its handler):
    # products 2 * 8 steps * 4 in * 12 gates + 2 * 8 * 3 hidden * 12 = 768 + 576 = 1344;
    # element-wise per step 12 gate adds + 3 cell adds + 9 muls + 9 sigmoids + 3 + 3 tanh = 39
    assert report.totals.operator_flops.is_complete
    assert report.totals.operator_flops.value == 1344 + 8 * 39 == 1656
    assert lstm.operator_flops.inclusive.value == 1656
    # DMAs counted: the LSTM's 188 (its handler) + the root's own data movement, 149 elements:
    # pack reads and writes the 8 kept steps x 4 (2 * 32) + 2 lengths + 5 batch sizes = 71;
    # pad writes its [2, 5, 3] output (30) and copies the steps back in two runs of equal
    # batch size, 3 steps x 2 rows and 2 steps x 1 row of 3 features: 2*18 + 2*6 = 48
    assert lstm.metrics.dmas.value == 188
    assert report.layers[0].metrics.dmas.value == 188 + 71 + 30 + 48 == 337
    assert report.totals.dmas.is_complete
    assert not [d for d in report.diagnostics if d.code == "unmodelled_data_movement"]


class Concatenate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Identity(), nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.a(x), self.b(x)], dim=1)


def test_a_concatenating_forward_counts_its_dmas() -> None:
    report = crawl_module(Concatenate(), (3,))
    # cat reads 2 x [1, 3] and writes [1, 6]: 6 + 6 = 12 elements (was a lower bound of 0)
    assert report.totals.dmas.value == 12 and report.totals.dmas.is_complete


# ------------------------------------------------------------------ torchinfo: no input


class SingleInputNet(nn.Module):
    """torchinfo's ``SingleInputNet`` (``test_basic_summary``: ``summary(model)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d(0.3)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise AssertionError("no input given: the forward must not run")


class ParameterA(nn.Module):  # no forward at all
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1024))


class ParameterB(ParameterA):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)


class EmptyModule(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.parameter = torch.rand(3, 3, requires_grad=True)  # a plain tensor attribute

    def forward(self) -> dict[str, torch.Tensor]:
        return {"loss": self.parameter.sum()}


class RegisterParameter(nn.Sequential):
    def __init__(self, *blocks: nn.Module) -> None:
        super().__init__(*blocks)
        self.register_parameter("weights", nn.Parameter(torch.zeros(len(blocks))))


class UninitializedParameterModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.param = nn.UninitializedParameter()


# (model, total parameters, own parameters per module in named_modules order), each worked
# out by hand: Conv2d(i, o, k) = o*i*k*k + o, Linear(i, o) = i*o + o
NO_INPUT_CASES = {
    # 10*1*25 + 10 = 260; 20*10*25 + 20 = 5,020; 320*50 + 50 = 16,050; 50*10 + 10 = 510
    "basic_summary": (SingleInputNet, 21_840, [0, 260, 5_020, 0, 16_050, 510]),
    "single_linear_layer": (lambda: nn.Linear(2, 5), 15, [15]),  # 2*5 + 5
    "empty_module": (EmptyModule, 0, [0]),  # the tensor is not registered: no parameter
    "empty_module_list": (nn.ModuleList, 0, [0]),
    "single_parameter_a": (ParameterA, 1_024, [1_024]),
    "single_parameter_b": (ParameterB, 1_192, [1_024, 168]),  # 6*3*9 + 6 = 168
    # 2 + (2*2 + 2) * 2 = 14
    "register_parameter": (
        lambda: RegisterParameter(nn.Linear(2, 2), nn.Linear(2, 2)),
        14,
        [2, 6, 6],
    ),
    "model_on_device": (lambda: nn.Linear(10, 10), 110, [110]),  # 10*10 + 10 (gpu_test)
    "parts_on_devices": (
        lambda: nn.Sequential(nn.Linear(10, 10), nn.Linear(10, 10)),
        220,
        [0, 110, 110],
    ),
}


def test_torchinfo_no_input_cases_give_parameters_only_reports() -> None:
    for name, (factory, total, own) in NO_INPUT_CASES.items():
        model = factory()
        flags = [m.training for m in model.modules()]
        report = crawl_module(model)
        assert report.totals.parameters.value == total, name
        assert report.totals.trainable_parameters.value == total, name
        assert [layer.params.parameters for layer in report.layers] == own, name
        assert [m.training for m in model.modules()] == flags  # nothing switched to eval
        for metric in ("module_flops", "macs", "dmas", "operator_flops"):
            assert getattr(report.totals, metric).status == "unavailable", (name, metric)
        assert all(layer.output is None for layer in report.layers)
        assert [d.code for d in report.diagnostics] == ["no_input"]
        assert load_report(report_text(report)) == report


def test_no_input_counts_shared_weights_once_and_splits_frozen_and_buffers() -> None:
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10, bias=False), nn.BatchNorm1d(4))
    model[1].weight = model[0].weight  # tied: one 40-element tensor under two modules
    model[2].requires_grad_(False)
    report = crawl_module(model)
    totals = report.totals
    # 10*4 = 40 tied weight once + BatchNorm's 4 + 4 frozen affine = 48
    assert (totals.parameters.value, totals.frozen_parameters.value) == (48, 8)
    assert totals.trainable_parameters.value == 40
    # running_mean 4 + running_var 4 + num_batches_tracked 1 = 9 buffer elements
    assert totals.buffer_elements.value == 9
    assert [
        (layer.params.parameters, layer.params.shared_parameters) for layer in report.layers
    ] == [
        (0, 0),
        (40, 0),
        (40, 40),  # shown by the embedding already
        (8, 0),
    ]
    assert report.subtree_parameters()[""] == 48


def test_no_input_on_a_lazy_model_is_a_lower_bound_with_a_warning(capsys: Any) -> None:
    report = summary(UninitializedParameterModel())
    # torchinfo says 0 (complete); the parameter has no size yet: >= 0, partial
    assert report.totals.parameters.status == "partial"
    assert report.totals.parameters.known_value == 0
    (lazy,) = [d for d in report.diagnostics if d.code == "uninitialized_parameters"]
    assert "<root>" in lazy.message and lazy.severity == "warning"
    assert "Parameters: >=0 (trainable >=0" in capsys.readouterr().out


# -------------------------------------------------------- torchinfo: object outputs


class CategoricalOutputModel(nn.Module):
    """torchinfo's ``test_categorical_distribution_output`` model."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(10, 5)
        self.log_softmax = nn.LogSoftmax(dim=-1)

    def forward(self, x: torch.Tensor) -> Categorical:
        return Categorical(logits=self.log_softmax(self.linear(x)))


class NormalOutputModel(nn.Module):
    """torchinfo's ``test_normal_distribution_output`` model."""

    def __init__(self) -> None:
        super().__init__()
        self.mean_layer = nn.Linear(10, 5)
        self.std_layer = nn.Linear(10, 5)

    def forward(self, x: torch.Tensor) -> Normal:
        return Normal(loc=self.mean_layer(x), scale=F.softplus(self.std_layer(x)))


@dataclasses.dataclass
class Heads:
    logits: torch.Tensor
    hidden: tuple[torch.Tensor, torch.Tensor]
    label: str = "x"  # no tensor: not recorded


Point = namedtuple("Point", ["x", "y"])


class Holder:
    def __init__(self, value: torch.Tensor) -> None:
        self.value = value
        self._cache = value  # private: not recorded
        self.count = 3


class ObjectOutputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> tuple[Heads, Point, Holder]:
        y = self.linear(x)
        return Heads(y, (y, x)), Point(y, x), Holder(y)


def _shapes(meta: Any) -> Any:
    """A ValueMeta as nested (type, {key: shape}) for short assertions."""
    if meta.kind == "tensor":
        return meta.shape
    inner = [_shapes(item) for item in meta.items or []]
    return (meta.type_name, dict(zip(meta.keys, inner, strict=True)) if meta.keys else inner)


def test_distribution_outputs_record_their_tensors_by_attribute() -> None:
    report = crawl_module(CategoricalOutputModel(), (10,))
    assert report.totals.parameters.value == 55  # torchinfo: Linear(10, 5) 50 + 5
    assert _shapes(report.layers[0].output) == ("Categorical", {"logits": [1, 5]})
    report = crawl_module(NormalOutputModel(), (10,))
    assert report.totals.parameters.value == 110  # two Linear(10, 5): 2 * 55
    assert _shapes(report.layers[0].output) == ("Normal", {"loc": [1, 5], "scale": [1, 5]})
    assert load_report(report_text(report)) == report


def test_dataclass_named_tuple_and_object_outputs_by_attribute_path(capsys: Any) -> None:
    report = summary(ObjectOutputs(), args=(torch.rand(3, 4),))
    heads, point, holder = _shapes(report.layers[0].output)[1]
    assert heads == ("Heads", {"logits": [3, 2], "hidden": (None, [[3, 2], [3, 4]])})
    assert point == ("Point", {"x": [3, 2], "y": [3, 4]})
    assert holder == ("Holder", {"value": [3, 2]})
    assert "Point(x: [3, 2], y: [3, 4])" in capsys.readouterr().out
    assert load_report(report_text(report)) == report


class HalfLazy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used = nn.LazyLinear(3)
        self.unused = nn.LazyLinear(2)  # never called: its sizes stay unknown

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(x)


def test_a_lazy_module_the_forward_never_called_makes_the_counts_a_lower_bound() -> None:
    report = crawl_module(HalfLazy(), (4,))
    # the called one materialised: 4*3 + 3 = 15; the other has no size: >= 15, not 15
    assert report.totals.parameters.status == "partial"
    assert report.totals.parameters.known_value == 15
    (lazy,) = [d for d in report.diagnostics if d.code == "uninitialized_parameters"]
    assert "(unused)" in lazy.message


class ScatterInto(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros(2, 8).scatter(1, torch.tensor([[0, 1], [2, 3]]), x)


def test_a_scatter_counted_at_zero_flops_leaves_the_dmas_a_lower_bound() -> None:
    """A non-accumulating scatter is counted at 0 FLOPs but moves data: its module's own
    DMAs are not the zeros' 16 elements alone (they were reported complete)."""
    report = crawl_module(ScatterInto(), args=(torch.rand(2, 2),))
    assert report.totals.module_flops.value == 0 and report.totals.module_flops.is_complete
    assert report.totals.dmas.status == "partial" and report.totals.dmas.known_value == 16
    assert [d.code for d in report.diagnostics] == ["unmodelled_data_movement"]
