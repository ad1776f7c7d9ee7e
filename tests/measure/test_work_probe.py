"""WorkProbe: counts operators and non-view output elements, and changes no result."""

from __future__ import annotations

import torch

from torchscan_stages.measure.work_probe import WorkProbe


def test_views_of_a_weight_are_no_work() -> None:
    weight = torch.ones(4, 8)
    probe = WorkProbe()
    with probe:
        weight.t()  # aten.t: a view, 1 operator call, no elements produced
    assert (probe.operators, probe.elements_out) == (1, 0)
    empty = probe.diagnostic("operator_flops")
    assert empty is not None and empty.code == "empty_work" and empty.count == 1


def test_real_work_counts_elements_and_keeps_the_result() -> None:
    x = torch.arange(6.0).reshape(2, 3)
    probe = WorkProbe()
    with probe:
        y = x * 2  # aten.mul: 2 x 3 = 6 output elements
    assert probe.operators == 1 and probe.elements_out == 6
    assert y.tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    assert probe.diagnostic("latency.throughput") is None


def test_no_operator_is_not_empty_work() -> None:
    probe = WorkProbe()
    with probe:
        pass
    unseen = probe.diagnostic("operator_flops")  # nothing ran: not empty work, no evidence
    assert unseen is not None and unseen.code == "no_operators"
