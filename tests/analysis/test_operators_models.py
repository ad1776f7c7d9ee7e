"""Operator FLOPs on real (locally built) models: complete, agreeing with torch, path-independent.

For every model: with the default fast paths ``total`` is complete; with the fast paths off
(``torch.backends.mha`` fast path, CPU flash attention -> math SDPA, oneDNN RNN) the operators
that torch's FlopCounterMode knows (matmul/conv/attention) agree with FlopCounterMode within 1%;
and the fast-path total agrees with the slow-path total within 1%, so fused kernels are counted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from torchscan_stages.analysis.operators import measure_flops
from torchscan_stages.report import FlopReport

TORCH_KNOWN = {str(key) for key in flop_registry}


@contextlib.contextmanager
def slow_paths() -> Iterator[None]:
    """Decomposed paths that FlopCounterMode can see; restored afterwards."""
    previous = torch.backends.mha.get_fastpath_enabled()
    mkldnn = torch._C._get_mkldnn_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    torch._C._set_mkldnn_enabled(False)  # mkldnn.flags() would warn about TF32 on CPU builds
    try:
        with sdpa_kernel(SDPBackend.MATH):
            yield
    finally:
        torch.backends.mha.set_fastpath_enabled(previous)
        torch._C._set_mkldnn_enabled(mkldnn)


def _torch_total(workload: Callable[[], Any]) -> int:
    with FlopCounterMode(display=False) as counter:
        workload()
    return counter.get_total_flops()


def _torch_known_part(report: FlopReport) -> int:
    return sum(
        int(op.flops.value or 0) for name, op in report.by_operator.items() if name in TORCH_KNOWN
    )


class SmallResNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU()
        )
        self.conv1, self.bn1 = nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.conv2, self.bn2 = nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.pool, self.head = nn.MaxPool2d(2), nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        x = self.pool(F.relu(x + y))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


class EmbedConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed, self.conv, self.head = (
            nn.Embedding(50, 16),
            nn.Conv1d(16, 8, 3),
            nn.Linear(8, 2),
        )

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.conv(self.embed(tokens).transpose(1, 2)))
        return self.head(h.max(dim=2).values)


class Functional(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(32, 32) / 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.layer_norm(torch.einsum("bld,de->ble", x, self.w) @ self.w, (32,))
        q = h.view(2, 10, 4, 8).transpose(1, 2)
        return F.scaled_dot_product_attention(q, q, q).sum() + h.sum()


def _recurrent(cls: type[nn.Module], **kwargs: Any) -> nn.Module:
    return cls(16, 32, **kwargs)


def build(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...], str | None]:
    """(model, inputs, fused operator expected on the default CPU path)."""
    torch.manual_seed(0)
    seq = torch.randn(2, 10, 32)
    model: nn.Module
    if name == "mlp":
        model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 8))
        return model, (torch.randn(8, 16),), None
    if name == "resnet":
        return SmallResNet(), (torch.randn(2, 3, 16, 16),), None
    if name == "depthwise_transpose":
        model = nn.Sequential(
            nn.Conv2d(8, 8, 3, padding=1, groups=8),
            nn.Conv2d(8, 16, 1),
            nn.ReLU6(),
            nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1),
            nn.AvgPool2d(2),
            nn.GroupNorm(2, 8),
            nn.InstanceNorm2d(8, affine=True),
            nn.Upsample(scale_factor=2, mode="bilinear"),
        )
        return model, (torch.randn(2, 8, 12, 12),), None
    if name == "transformer_encoder":
        layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
        model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        return model, (seq,), "aten._transformer_encoder_layer_fwd"
    if name == "transformer_encoder_norm_first_gelu":
        layer = nn.TransformerEncoderLayer(
            32, 4, 64, batch_first=True, norm_first=True, activation="gelu"
        )
        return (
            nn.TransformerEncoder(layer, 1, enable_nested_tensor=False),
            (seq,),
            ("aten._transformer_encoder_layer_fwd"),
        )
    if name == "multihead_attention":
        model = nn.MultiheadAttention(32, 4, batch_first=True)
        return model, (seq, seq, seq), "aten._native_multi_head_attention"
    if name == "lstm":
        mkldnn = "aten.mkldnn_rnn_layer" if torch.backends.mkldnn.is_available() else None
        return _recurrent(nn.LSTM, num_layers=2, batch_first=True), (torch.randn(3, 5, 16),), mkldnn
    if name == "gru":
        return _recurrent(nn.GRU, bidirectional=True), (torch.randn(5, 3, 16),), None
    if name == "functional":
        return Functional(), (seq,), "aten._scaled_dot_product_flash_attention_for_cpu"
    if name == "embedding_conv1d":
        return EmbedConv(), (torch.randint(0, 50, (4, 12)),), None
    raise AssertionError(name)


MODELS = [
    "mlp",
    "resnet",
    "depthwise_transpose",
    "transformer_encoder",
    "transformer_encoder_norm_first_gelu",
    "multihead_attention",
    "lstm",
    "gru",
    "functional",
    "embedding_conv1d",
]


@pytest.mark.parametrize("name", MODELS)
def test_eval_no_grad_complete_and_agrees(name: str) -> None:
    model, inputs, fused = build(name)
    model.eval()

    def workload() -> Any:
        with torch.no_grad():
            return model(*inputs)

    fast = measure_flops(workload)
    with slow_paths():
        slow = measure_flops(workload)
        reference = _torch_total(workload)
    assert fast.total.status == "complete", fast.diagnostics
    assert slow.total.status == "complete", slow.diagnostics
    if fused is not None:
        assert fused in fast.by_operator, sorted(fast.by_operator)
        assert fused not in slow.by_operator
    assert reference > 0
    assert _torch_known_part(slow) == pytest.approx(reference, rel=0.01)
    assert fast.total.value == pytest.approx(slow.total.value, rel=0.01)


def _step(model: nn.Module, inputs: tuple[torch.Tensor, ...], optimizer: Any) -> Callable[[], None]:
    def step() -> None:
        optimizer.zero_grad()
        out = model(*inputs)
        out = out[0] if isinstance(out, tuple) else out
        out.pow(2).mean().backward()
        optimizer.step()

    return step


@pytest.mark.parametrize(
    ("name", "optimizer"),
    [
        ("resnet", "sgd"),
        ("transformer_encoder", "adam"),
        ("lstm", "adam_foreach"),
        ("embedding_conv1d", "adamw_fused"),
        ("multihead_attention", "sgd"),
        ("gru", "adam"),
    ],
)
def test_training_step_complete_and_agrees(name: str, optimizer: str) -> None:
    model, inputs, _ = build(name)
    model.train()
    params = list(model.parameters())
    make = {
        "sgd": lambda: torch.optim.SGD(params, lr=0.01, momentum=0.9),
        "adam": lambda: torch.optim.Adam(params, foreach=False),
        "adam_foreach": lambda: torch.optim.Adam(params, foreach=True),
        "adamw_fused": lambda: torch.optim.AdamW(params, fused=True),
    }[optimizer]
    step = _step(model, inputs, make())
    step()  # optimizer state exists from here on: every measured step does the same work
    report = measure_flops(step)
    with slow_paths():
        slow = measure_flops(step)
        reference = _torch_total(step)
    assert report.total.status == "complete", report.diagnostics
    assert slow.total.status == "complete", slow.diagnostics
    assert _torch_known_part(slow) == pytest.approx(reference, rel=0.01)
    assert report.by_module  # backward and forward attributed somewhere


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ["transformer_encoder", "lstm", "functional", "resnet"])
def test_cuda_kernels_complete(name: str) -> None:
    """cuDNN RNN, flash/efficient attention and cuDNN convolution kernels are counted."""
    model, inputs, _ = build(name)
    model = model.cuda().eval()
    cuda_inputs = tuple(t.cuda() for t in inputs)

    def workload() -> Any:
        with torch.no_grad():
            out = model(*cuda_inputs)
        torch.cuda.synchronize()
        return out

    report = measure_flops(workload)
    assert report.total.status == "complete", report.diagnostics
    assert report.total.value and report.total.value > 0
