"""The one precision routine (pipeline/precision.py) that every pipeline workload applies."""

from __future__ import annotations

import torch

from torchscan_stages.pipeline.precision import applied
from torchscan_stages.pipeline.schema import PrecisionConfig


def test_cast_autocast_and_float32_read_once() -> None:
    cast = applied(PrecisionConfig(name="bf16", dtype="bfloat16", apply="cast"))
    auto = applied(PrecisionConfig(name="amp", dtype="bfloat16", apply="autocast"))
    fp32 = applied(PrecisionConfig(name="fp32", dtype="float32", apply="autocast"))
    assert (cast.cast, cast.autocast, cast.dtype) == (True, False, torch.bfloat16)
    assert (auto.cast, auto.autocast) == (False, True)
    assert (fp32.cast, fp32.autocast) == (False, False)  # float32 changes nothing
    x = torch.ones(2, 3)
    assert cast.tensor(x).dtype == torch.bfloat16 and auto.tensor(x) is x
    assert cast.tensor(torch.arange(3)).dtype == torch.int64  # integers are never cast
    with auto.region("cpu"):
        # a 2x3 @ 3x2 matmul under bf16 autocast runs in bf16
        assert (x @ x.T).dtype == torch.bfloat16
    with cast.region("cpu"):
        assert (x @ x.T).dtype == torch.float32  # cast precision has no autocast region


def test_building_sets_and_restores_the_default_dtype() -> None:
    cast = applied(PrecisionConfig(name="fp16", dtype="float16", apply="cast"))
    before = torch.get_default_dtype()
    try:
        with cast.building():
            assert torch.nn.Linear(2, 2).weight.dtype == torch.float16
            raise KeyError("factory failed")
    except KeyError:
        pass
    assert torch.get_default_dtype() == before  # restored after a failure too
