"""Device resolution: explicit, validated, never a silent fallback."""

from __future__ import annotations

import pytest
import torch

from torchscan_stages.devices import make_synchronize, resolve_device
from torchscan_stages.measure.latency import measure_latency
from torchscan_stages.measure.memory import measure_peak_memory

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")


def test_cpu_and_default() -> None:
    assert resolve_device(None) == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    make_synchronize(torch.device("cpu"))()  # a no-op on the CPU


def test_bad_device_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="device must be"):
        resolve_device(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a valid torch device"):
        resolve_device("gpu0")
    with pytest.raises(ValueError, match="not supported"):
        resolve_device("meta")
    with pytest.raises(ValueError, match="no device index"):
        resolve_device("cpu:1")


@no_cuda
def test_cuda_without_gpu_is_a_clear_error_before_any_call() -> None:
    calls = []
    with pytest.raises(ValueError, match="CUDA is not available"):
        measure_latency(lambda: calls.append(1), device="cuda")
    with pytest.raises(ValueError, match="CUDA is not available"):
        measure_peak_memory(lambda: calls.append(1), device="cuda:1")
    assert calls == []  # refused before the workload ran


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="this machine has MPS")
def test_mps_without_mps_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="MPS is not available"):
        resolve_device("mps")


@needs_cuda
@pytest.mark.cuda
def test_cuda_resolves_with_index_and_out_of_range() -> None:
    assert resolve_device("cuda").type == "cuda"
    count = torch.cuda.device_count()
    assert resolve_device(f"cuda:{count - 1}") == torch.device("cuda", count - 1)
    with pytest.raises(ValueError, match="does not exist"):
        resolve_device(f"cuda:{count}")
