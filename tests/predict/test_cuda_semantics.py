"""device="cuda" follows CUDA's kernels where they keep other bytes, and says where it cannot.

Every figure is for the CUDA allocator model: each storage rounded up to 512-byte blocks.
Shapes are chosen so most tensors are whole blocks; the arithmetic is beside each assert.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from torchscan_stages.measure.memory import measure_peak_memory
from torchscan_stages.predict import predict_peak_memory
from torchscan_stages.predict.cuda_attention import EFFICIENT, FLASH, MATH, Call, choose
from torchscan_stages.report import PredictionReport

B, H = 2, 4


def _attention(
    dtype: torch.dtype, *, length: int = 64, head_dim: int = 32, train: bool = True,
    backward: bool = True, dropout: float = 0.0, forced: SDPBackend | None = None,
) -> Callable[[], None]:  # fmt: skip
    def workload() -> None:
        q, k, v = (
            torch.randn(B, H, length, head_dim, dtype=dtype, requires_grad=train) for _ in range(3)
        )
        with (
            torch.set_grad_enabled(train),
            sdpa_kernel(forced) if forced is not None else torch.enable_grad(),
        ):
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
        if train and backward:
            out.sum().backward()

    return workload


def _codes(report: PredictionReport) -> dict[str, str]:
    return {d.code: d.severity for d in report.diagnostics}


def _measured(workload: Callable[[], None]) -> int:
    return int(measure_peak_memory(workload).memory.results[0].value)  # type: ignore[union-attr]


def test_backend_choice_follows_sdp_utils_on_sm80() -> None:
    def call(dtype: torch.dtype, d: int = 32, mask: bool = False) -> Call:
        q = torch.empty(B, H, 16, d, dtype=dtype)
        return Call(q, q, q, attn_mask=torch.ones(16, 16, dtype=torch.bool) if mask else None)

    assert choose(call(torch.bfloat16))[0] == FLASH  # fp16/bf16, no mask, head dim <= 256
    assert choose(call(torch.bfloat16, mask=True))[0] == EFFICIENT  # flash takes no mask
    assert choose(call(torch.float32))[0] == EFFICIENT  # flash needs fp16/bf16
    assert choose(call(torch.float32, d=30))[0] == MATH  # 30 % 4 != 0: no efficient kernel
    assert choose(call(torch.bfloat16, d=12))[0] is None  # CUDA pads flash's 12 to 16


def test_flash_keeps_an_fp32_logsumexp_and_its_philox_state() -> None:
    report = predict_peak_memory(
        _attention(torch.bfloat16, length=40, backward=False), device="cuda"
    )
    # q, k, v, out: 2*4*40*32 bf16 = 20,480 B each (40 blocks); logsumexp [2, 4, 40] fp32 =
    # 1,280 B -> 1,536; philox seed (2 x uint64) and offset: one block each; debug mask 0 B
    assert report.peak.value == 4 * 20_480 + 1_536 + 2 * 512 == 84_480
    assert report.peak.status == "complete" and _codes(report)["cuda_attention_backend"] == (
        "warning"
    )
    assert any("flash kernel (1 call(s))" in a for a in report.assumptions)


def test_memory_efficient_pads_its_logsumexp_to_32() -> None:
    report = predict_peak_memory(
        _attention(torch.float32, length=40, backward=False), device="cuda"
    )
    # q, k, v, out: 2*4*40*32 fp32 = 40,960 B each; logsumexp [2, 4, ceil(40/32)*32 = 64]
    # fp32 = 2,048 B; philox seed and offset (int64 scalars): one 512-byte block each
    assert report.peak.value == 4 * 40_960 + 2_048 + 2 * 512 == 166_912
    (diag,) = [d for d in report.diagnostics if d.code == "cuda_attention_backend"]
    assert "1 x memory_efficient" in diag.message and "2,048 bytes of logsumexp" in diag.message


def test_memory_efficient_training_step_closed_form() -> None:
    report = predict_peak_memory(_attention(torch.float32, dropout=0.1), device="cuda")
    # 65,536 B per [2, 4, 64, 32] fp32 tensor. Dropout runs inside the fused kernel. At the
    # peak: q, k, v, out (4), the three gradients in the kernel's BMHK layout (3), and one
    # contiguous copy AccumulateGrad makes of each in turn (1); the loss and its ones_like
    # gradient, one block each. The logsumexp and philox state were freed with the node.
    # (The copy follows the meta kernel's BMHK gradient layout; CUDA's kernel allocates
    # grad_q in the query's own strides, so on a GPU that copy of a leaf may not happen:
    # one 65,536 B transient, within the cuda_attention_backend warning.)
    assert report.peak.value == 8 * 65_536 + 2 * 512 == 525_312
    assert report.phase_at_peak == "backward"


def test_math_backend_is_exact_where_no_gpu_chooses_otherwise() -> None:
    """Head dim 30 in fp32: no fused kernel on an sm80+ GPU, so CUDA runs the math composite, the
    same code the CPU runs when forced to it, measured here for real."""
    inference = predict_peak_memory(
        _attention(torch.float32, head_dim=30, train=False), device="cuda"
    )
    real = _measured(_attention(torch.float32, head_dim=30, train=False, forced=SDPBackend.MATH))
    # every storage of this step is a whole number of 512-byte blocks (q: 2*4*64*30*4 =
    # 61,440 B = 120 blocks; the causal mask 64*64 bool = 8 blocks; scores 2*4*64*64*4)
    assert inference.peak.value == real == 524_288
    assert inference.peak.status == "complete"
    assert not any(code.startswith("cuda_") for code in _codes(inference))
    training = predict_peak_memory(_attention(torch.float32, head_dim=30), device="cuda")
    real = _measured(_attention(torch.float32, head_dim=30, forced=SDPBackend.MATH))
    # the same, plus the loss and its ones_like gradient: 4-byte scalars, one block each
    assert training.peak.value == real + 2 * (512 - 4)
    assert not any(code.startswith("cuda_") for code in _codes(training))


def test_cuda_dropout_saves_a_bool_mask() -> None:
    def workload() -> None:
        x = torch.randn(64, 64, requires_grad=True)  # 16,384 B
        F.dropout(x, 0.1, training=True)

    cuda = predict_peak_memory(workload, device="cuda")
    # x, the output (16,384 B each) and native_dropout's bool mask, 64*64 B = 4,096 B
    assert cuda.peak.value == 2 * 16_384 + 4_096 == 36_864
    assert any("native_dropout (1 call(s))" in a for a in cuda.assumptions)
    cpu = predict_peak_memory(workload, device="cpu")
    # the CPU's dropout: x, a noise tensor in fp32 and the output, 3 * 16,384 B
    assert cpu.peak.value == 3 * 16_384 == _measured(workload)
    assert cpu.assumptions == []


def test_a_cpu_prediction_is_unchanged() -> None:
    step = _attention(torch.float32, dropout=0.1)
    report = predict_peak_memory(step, device="cpu")
    assert not any(code.startswith(("cuda_", "cpu_autocast")) for code in _codes(report))
    assert report.assumptions == []
    # the CPU's kernels (its dropout forces the math path): within 5 % of the real run
    measured = _measured(step)
    assert abs(report.peak.value - measured) <= 0.05 * measured  # type: ignore[operator]


def test_autocast_cuda_turned_off_is_a_warning_on_the_peak() -> None:
    def workload() -> None:
        layer = nn.Linear(64, 64)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = layer(torch.randn(8, 64))
        y.sum().backward()

    with pytest.warns(UserWarning, match="Disabling autocast"):  # the real torch, outside
        torch.autocast("cuda", dtype=torch.bfloat16)
    report = predict_peak_memory(workload, device="cuda")
    (diag,) = [d for d in report.diagnostics if d.code == "cuda_autocast_not_run"]
    assert diag.severity == "warning" and diag.metric == "peak"
    assert "test_cuda_semantics.py:" in diag.message  # the user's autocast line
    from torchscan_stages.render import render_index, render_report

    html = render_report(report)
    assert "with warnings: cuda_autocast_not_run" in html  # on the peak's card
    assert "with warnings: cuda_autocast_not_run" in render_index([report], title="t")
    from torchscan_stages.pipeline.feedback import figure
    from torchscan_stages.render.caveats import prediction_caveats

    line = figure("predicted peak", report.peak, prediction_caveats(report))  # the stage's
    assert line.endswith("(complete with warnings: cuda_autocast_not_run)"), line


def test_cpu_autocast_under_a_cuda_prediction_names_the_differing_operators() -> None:
    model = nn.Sequential(nn.Linear(32, 32), nn.LayerNorm(32))

    def workload() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = model(torch.randn(4, 32)).softmax(-1)
        y.float().sum().backward()

    report = predict_peak_memory(workload, device="cuda")
    (diag,) = [d for d in report.diagnostics if d.code == "cpu_autocast_lists"]
    # CUDA's autocast runs layer_norm and softmax in fp32; CPU's lists leave them alone
    assert diag.severity == "warning" and diag.operator == "layer_norm, softmax"
    assert "layer_norm (CUDA list only, in Sequential.1)" in diag.message
    assert not any(
        d.code == "cpu_autocast_lists"
        for d in predict_peak_memory(workload, device="cpu").diagnostics
    )


def test_rnn_kernels_are_named() -> None:
    lstm = nn.LSTM(8, 8)

    def workload() -> None:
        lstm(torch.randn(3, 2, 8))[0].sum().backward()

    report = predict_peak_memory(workload, device="cuda")
    (diag,) = [d for d in report.diagnostics if d.code == "cuda_rnn_not_modelled"]
    assert diag.path == "LSTM" and diag.operator == "lstm" and diag.severity == "warning"


def test_grouped_query_flash_is_modelled_and_unknown_calls_are_named() -> None:
    def workload(head_dim: int) -> Callable[[], None]:
        def step() -> None:
            q = torch.randn(B, H, 16, head_dim, dtype=torch.bfloat16)
            kv = torch.randn(B, 2, 16, head_dim, dtype=torch.bfloat16)
            F.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)

        return step

    flash = predict_peak_memory(workload(32), device="cuda")
    # q [2, 4, 16, 32] bf16 = 8,192 B, shared k/v [2, 2, 16, 32] = 4,096 B, out 8,192 B;
    # no gradient: flash still returns its logsumexp [2, 4, 16] fp32 = 512 B, philox 2 x 512
    assert flash.peak.value == 8_192 + 4_096 + 8_192 + 512 + 2 * 512 == 22_016
    padded = predict_peak_memory(workload(12), device="cuda")
    (diag,) = [d for d in padded.diagnostics if d.code == "cuda_attention_not_modelled"]
    assert "multiple of 8" in diag.message and diag.metric == "peak"


def test_multihead_attention_runs_where_the_prediction_cannot_follow_it() -> None:
    layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)

    def workload() -> None:
        layer(torch.randn(2, 8, 32)).sum().backward()

    report = predict_peak_memory(workload, device="cuda")
    (diag,) = [d for d in report.diagnostics if d.code == "cuda_attention_not_modelled"]
    assert diag.path == "TransformerEncoderLayer.self_attn" and diag.severity == "warning"
    assert "multi_head_attention_forward" in diag.message


class _Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(64, 192), nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).view(2, 32, 3, 4, 16).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(attended.transpose(1, 2).reshape(2, 32, 64))


@pytest.mark.parametrize("reentrant", [False, True], ids=["non_reentrant", "reentrant"])
def test_checkpoint_recomputation_takes_the_forwards_attention_backend(reentrant: bool) -> None:
    """Recomputation runs in backward, where torch carries no torch-function mode: the
    forward took CUDA's memory-efficient kernel and the recomputation the CPU's flash one,
    and non-reentrant checkpointing (gradient_checkpointing_enable()'s default) raised
    CheckpointError (11 vs 9 saved tensors here)."""
    from torch.utils.checkpoint import checkpoint

    model, x = _Attention(), torch.randn(2, 32, 64, requires_grad=True)

    def step() -> None:
        checkpoint(model, x, use_reentrant=reentrant).pow(2).mean().backward()

    report = predict_peak_memory(step, device="cuda")
    assert report.peak.status == "complete"
    backend = next(d for d in report.diagnostics if d.code == "cuda_attention_backend")
    assert backend.count == 2  # the forward and its recomputation, both memory-efficient


def test_save_on_cpu_moves_saved_tensors_to_the_host_figure() -> None:
    model = nn.Sequential(*(nn.Sequential(nn.Linear(256, 256), nn.ReLU()) for _ in range(4)))
    x = torch.randn(512, 256)

    def plain() -> None:
        model(x).pow(2).mean().backward()

    def offloaded() -> None:
        with torch.autograd.graph.save_on_cpu():
            loss = model(x).pow(2).mean()
        loss.backward()

    kept, moved = (predict_peak_memory(f, device="cuda") for f in (plain, offloaded))
    assert kept.host_bytes is None and moved.host_bytes is not None
    activation, weight = 512 * 256 * 4, 256 * 256 * 4
    # saved on the host: 4 Linear inputs (x and 3 ReLU outputs), 4 ReLU outputs, pow's input,
    # and 3 weights (the first Linear's input needs no gradient, so its weight is not saved)
    assert moved.host_bytes.value == 9 * activation + 3 * weight
    assert moved.host_bytes.scope == "predicted_host_memory"
    assert PredictionReport.model_validate_json(moved.model_dump_json()) == moved
    assert moved.peak.value < kept.peak.value  # the activations left the device
    cpu = predict_peak_memory(offloaded, device="cpu")  # a CPU run keeps them where they are
    assert (
        cpu.host_bytes is None
        and cpu.peak.value == predict_peak_memory(plain, device="cpu").peak.value
    )
