"""max_batch_size: every probe is a real prediction, the answer is a fitting batch whose
successor does not fit, and a non-monotonic curve is refused."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

from torchscan_stages.predict import predict_peak_memory
from torchscan_stages.predict.capacity import BatchSearch, max_batch_size


def _mlp_step(batch: int) -> Callable[[], None]:
    def step() -> None:
        model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(batch, 256)).pow(2).mean().backward()
        optimizer.step()

    return step


def _peak(batch: int) -> int:
    value = predict_peak_memory(_mlp_step(batch), device="cpu").peak.value
    assert isinstance(value, int)
    return value


def test_largest_fitting_batch_and_its_successor_are_both_predicted() -> None:
    capacity = _peak(37) + 100  # batch 37 fits; 38 adds at least a row of 256 + 512 floats
    assert _peak(38) > capacity
    search = max_batch_size(_mlp_step, capacity_bytes=capacity, device="cpu")
    assert search.batch == 37
    probes = {p.batch: p for p in search.probes}
    assert probes[37].fits is True and probes[38].fits is False
    assert probes[37].peak.value == _peak(37)  # a probe is the direct prediction
    assert list(search.curve) == sorted(probes)  # the curve: every probe, by batch
    assert len(search.probes) <= 8  # doubling to 2, extrapolation, then the answer's pair
    assert [d.code for d in search.diagnostics] == ["judged_on_steady_state"]
    again = BatchSearch.model_validate_json(search.model_dump_json())
    assert again == search


def test_nothing_fits_says_so() -> None:
    search = max_batch_size(_mlp_step, capacity_bytes=1000, device="cpu")
    assert search.batch is None
    assert [d.code for d in search.diagnostics] == ["nothing_fits", "judged_on_steady_state"]
    assert len(search.probes) == 1


def test_limit_still_fitting_is_reported() -> None:
    search = max_batch_size(_mlp_step, capacity_bytes=10**9, device="cpu", limit=16)
    assert search.batch == 16
    assert any(d.code == "limit_fits" for d in search.diagnostics)


def test_a_peak_that_falls_with_the_batch_returns_no_batch() -> None:
    def step_factory(batch: int) -> Callable[[], None]:
        def step() -> None:
            # a workload whose scratch shrinks as the batch grows: 4 * (4096 - 64 * batch) B
            scratch = torch.empty(max(4096 - 64 * batch, 1))
            del scratch

        return step

    search = max_batch_size(step_factory, capacity_bytes=10**6, device="cpu")
    assert search.batch is None
    assert any(d.code == "non_monotonic_peak" for d in search.diagnostics)


def test_capacity_is_required_and_checked() -> None:
    with pytest.raises(TypeError):
        max_batch_size(_mlp_step, device="cpu")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="capacity_bytes"):
        max_batch_size(_mlp_step, capacity_bytes=0, device="cpu")


def _wide_step(batch: int) -> Callable[[], None]:
    def step() -> None:
        model = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(batch, 256, 64)).pow(2).mean().backward()
        optimizer.step()

    return step


@pytest.mark.parametrize("extra", [0, 1000])
def test_an_activation_bound_affine_peak_is_settled_in_three_probes(extra: int) -> None:
    peaks = {b: predict_peak_memory(_wide_step(b), device="cpu").peak.value for b in (1, 7, 8)}
    # per sample: three 256 x 1024 fp32 hidden tensors (1 MiB each) and the 256 x 64 input
    per_sample = 3 * 256 * 1024 * 4 + 256 * 64 * 4
    assert peaks[8] - peaks[7] == per_sample and peaks[7] - peaks[1] == 6 * per_sample
    search = max_batch_size(_wide_step, capacity_bytes=peaks[7] + extra, device="cpu")
    # the first probe's activations, temporaries and other bytes aim at batch 7; the search
    # then predicts 7 and 8 directly: three probes, each the direct prediction
    assert search.batch == 7
    assert [(p.batch, p.peak.value) for p in search.probes] == [
        (1, peaks[1]),
        (7, peaks[7]),
        (8, peaks[8]),
    ]
    assert [p.fits for p in search.probes] == [True, True, False]


def test_probes_report_the_figure_their_verdict_judged() -> None:
    """An AdamW step whose peak is in the backward: a steady-state step holds the moments
    through it, so the headline (steady-state) peak is above the first step's; the search
    must report and interpolate on that figure, or it reads 'fits=False' under a peak below
    the capacity and creeps down one batch per probe."""

    def factory(batch: int) -> Callable[[], None]:
        def step() -> None:
            model = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1))
            optimizer = torch.optim.AdamW(model.parameters())
            model(torch.randn(batch, 256, 64)).pow(2).mean().backward()
            optimizer.step()

        return step

    report = predict_peak_memory(factory(7), device="cpu")
    assert report.headline == "steady_state_peak" and report.steady_state_peak is not None
    steady = report.steady_state_peak.value
    assert isinstance(steady, int) and steady > report.peak.value
    # held through the backward: the two fp32 moments of the 64x1024 + 1024 + 1024 + 1
    # parameters (270,340 B each) and the four 4-byte step counters
    assert steady - report.peak.value == 2 * (64 * 1024 + 1024 + 1024 + 1) * 4 + 4 * 4
    search = max_batch_size(factory, capacity_bytes=steady, device="cpu")
    assert search.batch == 7
    for probe in search.probes:
        assert probe.headline == "steady_state_peak"
        assert probe.fits == (probe.peak.value + probe.resident_bytes <= steady)
    assert search.curve[7].value == steady
    assert len(search.probes) <= 4
