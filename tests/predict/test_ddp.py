"""DDP per-rank prediction: the unwrapped step plus DDP's construction broadcast and gradient
buckets, each checked against its closed form; unmodelled options are never complete."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from torchscan_stages.predict import predict_peak_memory
from torchscan_stages.predict.ddp import predict_ddp_peak_memory
from torchscan_stages.predict.parallelism import UNMODELLED


def _mlp_step(**options: Any) -> Callable[[Any], None]:
    def step(wrap: Any) -> None:
        model = wrap(nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)), **options)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(32, 256)).pow(2).mean().backward()
        optimizer.step()

    return step


PARAM_BYTES = (256 * 512 + 512 + 512 * 10 + 10) * 4  # 548,904 B of fp32 parameters


def test_ddp_is_the_unwrapped_step_plus_one_flat_bucket() -> None:
    ddp = predict_ddp_peak_memory(_mlp_step(), world_size=4, device="cpu")
    plain = predict_peak_memory(lambda: _mlp_step()(lambda module: module), device="cpu")
    assert ddp.peak.status == "complete" and (ddp.sharding, ddp.world_size) == ("ddp", 4)
    # first step, find_unused_parameters=False: one bucket holds every fp32 gradient
    assert ddp.by_category["gradient_buckets"].value == PARAM_BYTES
    assert ddp.peak.value == plain.peak.value + PARAM_BYTES  # the bucket lives all step
    assert sum(part.value for part in ddp.by_category.values()) == ddp.peak.value


def test_cuda_rounds_each_bucket_and_dtypes_get_their_own() -> None:
    def step(wrap: Any) -> None:
        model = nn.Sequential(nn.Linear(100, 100), nn.Linear(100, 3, dtype=torch.bfloat16))
        model = wrap(model)
        del model

    ddp = predict_ddp_peak_memory(step, world_size=2, device="cuda")
    # fp32: (100*100 + 100) * 4 = 40,400 -> 40,448 (512-byte blocks);
    # bf16: (300 + 3) * 2 = 606 -> 1,024
    [info] = [d for d in ddp.diagnostics if d.code == "per_rank_prediction"]
    assert "2 gradient bucket(s) of 41,472 bytes" in info.message
    assert ddp.peak.status == "complete"


def test_the_construction_broadcast_is_a_flat_copy_of_the_states() -> None:
    def step(wrap: Any) -> None:
        model = nn.Sequential(nn.Linear(256, 256), nn.Linear(256, 256))
        for param in model.parameters():
            param.requires_grad_(False)  # no bucket: only the broadcast's flat copy
        wrap(model)

    ddp = predict_ddp_peak_memory(step, world_size=2, device="cpu")
    states = 2 * (256 * 256 + 256) * 4  # 526,336 B in one 250 MiB chunk of four tensors
    assert ddp.peak.value == 2 * states  # the parameters and their flat copy at once
    assert ddp.by_category["gradient_buckets"].value == 0


def test_every_forward_broadcasts_the_buffers_as_a_flat_copy() -> None:
    class Stats(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mean", torch.zeros(65536))
            self.register_buffer("var", torch.ones(65536))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x

    def step(wrap: Any) -> None:
        model = wrap(Stats())
        model(torch.empty(1))
        model(torch.empty(1))

    ddp = predict_ddp_peak_memory(step, world_size=1, device="cpu")
    # two 256 KiB buffers and, at construction and before each forward, their flat copy
    assert ddp.peak.value == 2 * (2 * 65536 * 4) + 4  # + the 1-float input
    assert ddp.peak.status == "complete"
    assert ddp.by_category["buffers"].value == 2 * 65536 * 4


@pytest.mark.parametrize(
    "option",
    [{"gradient_as_bucket_view": True}, {"static_graph": True}, {"mixed_precision": "bf16"}],
)
def test_an_unmodelled_option_is_never_complete(option: dict[str, Any]) -> None:
    ddp = predict_ddp_peak_memory(_mlp_step(**option), world_size=2, device="cpu")
    assert ddp.peak.status == "partial"
    [name] = option
    assert any(d.code == UNMODELLED and name in d.message for d in ddp.diagnostics)


def test_modelled_neutral_options_stay_complete() -> None:
    options = {"bucket_cap_mb": 1, "device_ids": None, "find_unused_parameters": False}
    ddp = predict_ddp_peak_memory(_mlp_step(**options), world_size=2, device="cpu")
    assert ddp.peak.status == "complete"
    assert ddp.by_category["gradient_buckets"].value == PARAM_BYTES  # first step: one bucket


def test_a_step_that_never_wraps_is_partial() -> None:
    ddp = predict_ddp_peak_memory(lambda wrap: torch.empty(1000), world_size=2, device="cpu")
    assert ddp.peak.status == "partial"
    assert any(d.code == UNMODELLED and "never called wrap" in d.message for d in ddp.diagnostics)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="world"):
        predict_ddp_peak_memory(_mlp_step(), world_size=0, device="cpu")
    with pytest.raises(ValueError, match="rank"):
        predict_ddp_peak_memory(_mlp_step(), world_size=2, rank=2, device="cpu")
    with pytest.raises(TypeError, match="step"):
        predict_ddp_peak_memory(None, world_size=2)  # type: ignore[arg-type]


def test_max_batch_size_searches_a_ddp_step() -> None:
    from torchscan_stages.predict.capacity import max_batch_size

    def factory(batch: int) -> Callable[[Any], None]:
        def step(wrap: Any) -> None:
            model = wrap(nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)))
            model(torch.randn(batch, 256)).pow(2).mean().backward()

        return step

    def direct(batch: int) -> int:
        value = predict_ddp_peak_memory(factory(batch), world_size=2, device="cpu").peak.value
        assert isinstance(value, int)
        return value

    capacity = direct(20)  # batch 20 fits exactly; 21 adds at least one 512-float row
    search = max_batch_size(
        factory, capacity_bytes=capacity, device="cpu", world_size=2, sharding="ddp"
    )
    assert search.batch == 20
    assert search.curve[20].value == capacity and search.curve[21].value == direct(21)
    with pytest.raises(ValueError, match="sharding"):
        max_batch_size(factory, capacity_bytes=capacity, world_size=2, sharding="tp")
