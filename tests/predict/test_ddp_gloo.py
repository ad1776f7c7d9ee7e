"""Real validation of the DDP prediction: a 2- and a 4-process DistributedDataParallel step on
the gloo backend (CPU, 127.0.0.1), each rank's measured tracked peak against the prediction.

The ranks are launched once per world size for all the gloo tests (``gloo_world`` in
conftest.py); both DDP cases (with and without a BatchNorm's buffers) run in those processes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from gloo_cases import DDP_CAPACITY_BATCHES, DDP_CASES, GLOO_SHAPE, ddp_case
from gloo_launch import case_peaks
from predict_models import Decoder

from torchscan_stages.predict.capacity import max_batch_size
from torchscan_stages.predict.ddp import predict_ddp_peak_memory

pytestmark = pytest.mark.slow
GLOO_FAMILY = "ddp,steady"  # the cases gloo_world's launch runs for this module
# Tensors made from Python literals, which the prediction counts and the measured tracker
# cannot see (torch.tensor builds them before any dispatch): AdamW's step counters, one fp32
# scalar per parameter tensor, and BatchNorm's int64 num_batches_tracked. The decoder has 21
# parameter tensors (embedding, 2 blocks x 9, final norm, head): 21 x 4 = 84 B; the BatchNorm
# adds a weight and a bias and its counter: 23 x 4 + 8 = 100 B
LITERAL_BYTES = {"ddp": 21 * 4, "ddp_buffers": 23 * 4 + 8}


@pytest.mark.parametrize("case", sorted(DDP_CASES))
@pytest.mark.parametrize("world", [2, 4])
def test_real_gloo_ddp_ranks_match_the_prediction(
    world: int, case: str, gloo_world: Callable[[int], list[dict[str, Any]]]
) -> None:
    measured = case_peaks(gloo_world(world), case)
    assert len(measured) == world
    predicted = predict_ddp_peak_memory(ddp_case(case), world_size=world, device="cpu")
    assert predicted.peak.status == "complete"
    value = predicted.peak.value
    buckets = predicted.by_category["gradient_buckets"].value
    assert value is not None and buckets is not None
    assert buckets == predicted.by_category["gradients"].value  # one flat copy of every grad
    if DDP_CASES[case]:  # the BatchNorm's running stats, broadcast at construction and forward
        assert (predicted.by_category["buffers"].value or 0) > 0
    for rank, peak in enumerate(measured):
        # the bar: within 3 % of each rank's measured cpu_tracked_tensors peak
        assert abs(value - peak) <= 0.03 * peak, (rank, value, peak)
        # seen at 2 and at 4 ranks: 2,045,440 B measured, 2,045,524 predicted; with the
        # BatchNorm 2,057,728 and 2,057,828: over by the literals alone
        assert value - peak == LITERAL_BYTES[case], (rank, peak)
        # without the buckets the prediction would miss by the buckets' 19 % of the peak
        assert abs(value - buckets - peak) > 0.03 * peak


@pytest.mark.parametrize("world", [2, 4])
def test_real_gloo_ddp_steady_state_matches_two_real_steps(
    world: int, gloo_world: Callable[[int], list[dict[str, Any]]]
) -> None:
    """The steady-state headline against two real DDP steps on one model, per rank; with
    zero_grad(set_to_none=False) the gradients stay allocated between the steps too."""
    steady: dict[bool, int] = {}
    for set_to_none, case in ((True, "ddp_steady"), (False, "ddp_keep_steady")):
        measured = case_peaks(gloo_world(world), case)
        predicted = predict_ddp_peak_memory(
            ddp_case("ddp", set_to_none=set_to_none), world_size=world, device="cpu"
        )
        assert predicted.headline == "steady_state_peak"
        result = predicted.steady_state_peak
        assert result is not None and result.status == "complete"
        for rank, peak in enumerate(measured):
            # within 1 %; seen: 2,409,308 predicted, 2,409,224 measured (2,792,028 and
            # 2,791,944 with the gradients kept), over by the 21 step counters' literals
            assert abs(result.value - peak) <= 0.01 * peak, (rank, result.value, peak)
            assert result.value - peak == LITERAL_BYTES["ddp"]
        steady[set_to_none] = result.value
    # kept gradients: the set_to_none=True steady state plus all of them (382,720 B)
    assert steady[False] - steady[True] == 4 * sum(
        p.numel() for p in Decoder(GLOO_SHAPE).parameters()
    )


def test_ddp_max_batch_size_answer_fits_two_real_steps_and_the_next_does_not(
    gloo_world: Callable[[int], list[dict[str, Any]]],
) -> None:
    """sharding="ddp" at world 2 against two real DDP steps at each of DDP_CAPACITY_BATCHES:
    the capacity lies between their real peaks, so the answer must be the first."""
    records = gloo_world(2)
    below, above = DDP_CAPACITY_BATCHES
    fits = max(case_peaks(records, f"ddp_capacity_{below}"))
    fails = min(case_peaks(records, f"ddp_capacity_{above}"))
    capacity = (fits + fails) // 2  # seen: 3,726,728 and 4,165,896 -> 3,946,312
    search = max_batch_size(
        lambda batch: ddp_case("ddp", batch=batch),
        capacity_bytes=capacity,
        device="cpu",
        world_size=2,
        sharding="ddp",
    )
    assert search.sharding == "ddp"
    assert search.batch == below  # fits <= capacity < fails, both real two-step peaks
