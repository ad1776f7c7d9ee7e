"""Tensor parallelism stays ``partial``, and the evidence for modelling it later: a column-
then row-wise MLP (``parallelize_module``), the fake-world figure against a real gloo run's
measured per-rank peak at 2 and at 4 ranks. Where the weights dominate it is exact (but for
step counters the measured tracker cannot see); where the activations dominate the real run
holds bytes the fake world does not, so the figure is only a lower bound.

The ranks are launched once per world size for all the gloo tests (``gloo_world`` in
conftest.py); both TP steps are cases those processes run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from gloo_cases import TP_CASES, tp_case
from gloo_launch import case_peaks

from torchscan_stages.predict.parallelism import UNMODELLED
from torchscan_stages.predict.sharded import predict_sharded_peak_memory

pytestmark = pytest.mark.slow
GLOO_FAMILY = "tp"  # the cases gloo_world's launch runs for this module
STEP_COUNTERS = 2 * 4  # AdamW's step counters of the two weights, fp32 scalars from literals
# The prediction minus the measured peak, seen, with its arithmetic:
# - "tp": both peaks are 11 units of one weight shard (2 x 256 x 1024 x 4 / world / 2 B: 2 of
#   weights, 2 of gradients, 4 of moments, 3 of the step's temporaries) plus small scalars.
#   At 2 ranks both peaks are in the optimizer step, where the prediction also counts the 8 B
#   of step counters: 11 x 524,288 + 8 = 5,767,176 against 5,767,168. At 4 ranks the real
#   peak is in the backward, as high as its step's plus the loss and its gradient seed
#   (2 x 4 B, seen by both): 11 x 262,144 + 8 = 2,883,592 on both sides.
# - "tp_activations": the peak is in the backward, where the real run holds one more
#   32,768 B tensor (the size of the (4, 32, 64) fp32 input) than the fake world at 2 ranks
#   and two more at 4: 360,456 against 393,224 at 2 ranks, 262,152 against 327,688 at 4. Not
#   yet explained (among what the real run holds there, the functional all-reduce's output
#   and its autograd wrapper are separate storages); this is why the figure stays partial.
SEEN_GAP = {
    ("tp", 2): STEP_COUNTERS,
    ("tp", 4): 0,
    ("tp_activations", 2): -(4 * 32 * 64 * 4),
    ("tp_activations", 4): -2 * (4 * 32 * 64 * 4),
}


@pytest.mark.parametrize("case", sorted(TP_CASES))
@pytest.mark.parametrize("world", [2, 4])
def test_tensor_parallel_is_partial_and_a_lower_bound_of_a_real_gloo_run(
    world: int, case: str, gloo_world: Callable[[int], list[dict[str, Any]]]
) -> None:
    width, hidden, _, _ = TP_CASES[case]
    measured = case_peaks(gloo_world(world), case)
    assert len(measured) == world
    for rank, peak in enumerate(measured):
        predicted = predict_sharded_peak_memory(
            tp_case(case), world_size=world, rank=rank, device="cpu"
        )
        # not modelled, so never complete: the DTensor parameters fully_shard does not manage
        assert predicted.peak.status == "partial"
        assert any(d.code == UNMODELLED and "tensor parallel" in d.message
                   for d in predicted.diagnostics)  # fmt: skip
        # per rank 1 / world of the two weights, fp32: 2 x 256 x 1024 x 4 / 2 = 1,048,576 B
        assert predicted.by_category["parameters"].known_value == 2 * width * hidden * 4 // world
        value = predicted.peak.known_value
        assert value is not None
        # a lower bound: beyond the real run it sees only the literals' bytes
        assert value - STEP_COUNTERS <= peak, (rank, value, peak)
        assert value - peak == SEEN_GAP[case, world], (rank, value, peak)
        if case == "tp":  # where the weights dominate, it is also within the 3 %
            assert abs(value - peak) <= 0.03 * peak, (rank, value, peak)
