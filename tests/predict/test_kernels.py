"""Fake kernels that allocate differently from the real ones, corrected and tested real."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from torchscan_stages.measure.memory import measure_peak_memory
from torchscan_stages.predict import predict_peak_memory
from torchscan_stages.predict.kernels import CORRECTED, rnn_workspace_bytes


def _measured(workload: Callable[[], Any]) -> int:
    return int(measure_peak_memory(workload).memory.results[0].value)  # type: ignore[union-attr]


def _rnn_step(cls: type[nn.Module]) -> Callable[[], None]:
    def step() -> None:
        model = cls(32, 64, num_layers=2, batch_first=True)
        x = torch.randn(16, 20, 32)  # 20 steps: the GRU's CPU path dispatches per step
        model(x)[0].pow(2).mean().backward()  # type: ignore[operator]

    return step


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU], ids=["lstm", "gru"])
def test_rnn_training_step_matches_the_measured_peak(cls: type[nn.Module]) -> None:
    step = _rnn_step(cls)
    predicted = predict_peak_memory(step, device="cpu")
    measured = _measured(step)
    assert predicted.peak.status == "complete"
    # stated tolerance: 5 % (the bar). Measured on torch 2.13: both 3,420,168 B for
    # the LSTM (without the workspace correction the prediction was 839,688 B, 0.25x) and
    # 1,895,432 B for the GRU (its CPU path has no oneDNN workspace)
    assert abs(predicted.peak.value - measured) <= 0.05 * measured  # type: ignore[operator]


def test_the_lstm_workspace_is_the_real_kernels() -> None:
    """oneDNN keeps a workspace per layer for backward; the fake kernel returns 0 bytes."""
    x, h = torch.zeros(10, 4, 32), torch.zeros(4, 64)
    weights = (torch.zeros(256, 32), torch.zeros(256, 64), torch.zeros(256), torch.zeros(256))
    args = (x, *weights, h, h, False, [], 2, 64, 1, True, False, False, True)
    real = torch.ops.aten.mkldnn_rnn_layer.default(*args)[3]
    assert real.numel() > 0  # 180,224 bytes with torch 2.13's oneDNN
    assert rnn_workspace_bytes(args) == real.untyped_storage().nbytes()


def test_fp32_grouped_mm_predicts_instead_of_raising() -> None:
    """torch 2.13's meta kernel of _grouped_mm accepts only bf16; the CPU runs fp32."""

    def step() -> None:
        experts = nn.Parameter(torch.randn(3, 16, 8))  # 3 experts, 16 -> 8
        tokens = torch.randn(12, 16)
        offsets = torch.tensor([4, 8, 12], dtype=torch.int32)
        torch._grouped_mm(tokens, experts, offsets).pow(2).sum().backward()

    predicted = predict_peak_memory(step, device="cpu")
    assert predicted.peak.status == "complete"
    measured = _measured(step)
    # parameters 3*16*8*4 = 1536, tokens 768, output 12*8*4 = 384, gradient 1536, ...
    assert abs(predicted.peak.value - measured) <= 0.05 * measured  # type: ignore[operator]


def _adamw_step(foreach: bool | None) -> Callable[[], None]:
    def step() -> None:
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64))
        optimizer = torch.optim.AdamW(model.parameters(), foreach=foreach)
        model(torch.randn(8, 64)).pow(2).mean().backward()
        optimizer.step()

    return step


def test_cuda_predictions_follow_the_foreach_default() -> None:
    """On CUDA AdamW left to choose takes ``foreach``; on the CPU the per-tensor path."""
    default = predict_peak_memory(_adamw_step(None), device="cuda")
    assert default.peak.value == predict_peak_memory(_adamw_step(True), device="cuda").peak.value
    per_tensor = predict_peak_memory(_adamw_step(False), device="cuda")
    assert default.peak.value > per_tensor.peak.value  # type: ignore[operator]
    assert any("foreach=True" in note for note in default.assumptions)
    cpu = predict_peak_memory(_adamw_step(None), device="cpu")
    assert cpu.peak.value == predict_peak_memory(_adamw_step(False), device="cpu").peak.value
    assert cpu.assumptions == []


class _TransposedNorm(nn.Module):
    """PatchTST's layout: BatchNorm over channels of a (B, L, C) input, then a Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.norm, self.proj = nn.BatchNorm1d(16), nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.norm(x.transpose(1, 2)).transpose(1, 2))


def test_batch_norm_output_takes_the_cpu_kernels_layout() -> None:
    """The CPU kernel returns a contiguous output for a transposed input (and grad_input
    in the input's suggested layout); the fake kernel kept the input's strides."""
    x = torch.randn(4, 16, 8).transpose(1, 2)  # (B, C, L) = (4, 8, 16), C innermost
    ones, zeros = torch.ones(8), torch.zeros(8)
    forward = torch.ops.aten.native_batch_norm.default
    real = forward(x, ones, zeros, zeros.clone(), ones.clone(), True, 0.1, 1e-5)
    mode = FakeTensorMode()
    fakes = [mode.from_tensor(t) for t in (x, ones, zeros, zeros.clone(), ones.clone())]
    with mode:
        uncorrected = forward(*fakes, True, 0.1, 1e-5)
        corrected = CORRECTED[forward](forward, (*fakes, True, 0.1, 1e-5), {}, print)
    assert uncorrected[0].stride() == (128, 1, 8)  # the fake kernel: the input's strides
    assert corrected[0].stride() == real[0].stride() == (128, 16, 1)


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_batch_norm_on_a_transposed_input_matches_the_measured_peak(train: bool) -> None:
    model = _TransposedNorm().train(train)
    x = torch.randn(32, 64, 16)

    def step() -> None:
        with torch.set_grad_enabled(train):
            out = model(x)
            if train:
                out.pow(2).mean().backward()

    report = predict_peak_memory(step, device="cpu")
    assert report.peak.status == "complete"
    # before: the Linear viewed the fake (transposed) output where the real run copies the
    # contiguous one: 0.67x in inference on this case (0.79x on the issue's, 0.88x PatchTST)
    assert report.peak.value == _measured(step)


@pytest.mark.parametrize(
    ("training", "grad"), [(False, True), (True, False)], ids=["eval_backward", "train_no_grad"]
)
def test_lstm_workspace_follows_grad_mode_not_the_module_flag(training: bool, grad: bool) -> None:
    """oneDNN keeps its workspace whenever grad mode is on, whatever ``module.training``
    says (the audit's saved-tensor comparison found it on Encodec's eval-mode LSTM, where
    the prediction had 2 x 143,360 B less), and none under no_grad."""
    model = nn.LSTM(32, 64, num_layers=2).train(training)
    x = torch.randn(20, 16, 32)

    def step() -> None:
        with torch.set_grad_enabled(grad):
            out = model(x)[0]
            if grad:
                out.pow(2).mean().backward()

    report = predict_peak_memory(step, device="cpu")
    assert report.peak.status == "complete"
    assert report.peak.value == _measured(step)  # exact: the workspace is read off the kernel
