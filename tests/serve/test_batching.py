"""Dynamic batching of a forward: inputs stacked on dim 0, outputs split back per request."""

from __future__ import annotations

import pytest
import torch

from torchscan_stages.serve.batching import single_forward, split_output, stacked_forward
from torchscan_stages.serve.server import ContractError


def test_a_stacked_batch_gives_each_request_its_own_rows() -> None:
    layer = torch.nn.Linear(3, 2)
    calls: list[int] = []

    def forward(x: torch.Tensor, *, scale: float) -> torch.Tensor:
        calls.append(x.shape[0])
        return layer(x) * scale

    requests = [((torch.randn(n, 3),), {"scale": 2.0}) for n in (1, 2, 3)]
    outputs = stacked_forward(forward)(requests)
    assert calls == [6]  # one forward over 1 + 2 + 3 rows
    for (args, kwargs), out in zip(requests, outputs, strict=True):
        assert torch.allclose(out, single_forward(forward)((args, kwargs)), atol=1e-6)
    with pytest.raises(ContractError, match="differ in the non-tensor argument scale"):
        stacked_forward(forward)([requests[0], ((torch.randn(1, 3),), {"scale": 3.0})])


def test_outputs_split_by_structure_and_whole_batch_values_are_shared() -> None:
    cache = object()  # a KV cache or any object without the batch on dim 0
    output = {"logits": torch.arange(6).reshape(3, 2), "cache": cache, "pair": (torch.ones(3),)}
    first, second = split_output(output, [1, 2])
    assert first["logits"].tolist() == [[0, 1]] and second["logits"].tolist() == [[2, 3], [4, 5]]
    assert first["cache"] is cache and second["cache"] is cache
    assert second["pair"][0].shape == (2,)
