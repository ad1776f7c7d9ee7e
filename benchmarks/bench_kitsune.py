"""Max-batch search side by side: torch-kitsune 0.7.0's and ours, on the same model.

Run: ``.venv/bin/python benchmarks/bench_kitsune.py`` (needs the ``bench`` extra:
``pip install -c constraints.txt torch-kitsune==0.7.0``). The model is a stack of the test
decoder's blocks (RMSNorm, multi-head attention, SwiGLU MLP) fed float hidden states, fp32,
AdamW, one device: kitsune models neither sharding nor token-id inputs (its estimators feed
``torch.randn``), so this is the largest common ground. kitsune gets the model on ``meta``
(a real one would make its FX estimator run real forwards at every probed batch). The
capacity is kitsune's own usable size of its ``a100-80gb`` entry (80 GiB less its 0.5 GiB
driver allowance); kitsune adds 15 % overhead on top of its estimate, we add none (our
figure is ``max_memory_allocated``'s).

kitsune runs in a child process under a 3 GiB address-space limit: its search allocates a
real ``torch.randn(batch, *input_shape)`` at every probe (its FX estimator's sample input,
allocated before the estimator fails on a meta model), which at the first probed batch of
2048 was 34 GB for a wider model and was killed by the kernel's OOM killer here. Under the
limit such an allocation fails, and kitsune catches the error and silently falls back to
its next estimator. Ours runs in this process: fake tensors allocate nothing. Both are timed
by wall clock and CPU time. Our answer is checked by its own two side-by-side direct
predictions; kitsune's answer by a direct prediction of ours at that batch.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parents[1] / "tests" / "predict"
sys.path.insert(0, str(HERE))
from predict_models import Block, DecoderShape  # noqa: E402

from torchscan_stages import max_batch_size, predict_peak_memory  # noqa: E402

SHAPE = DecoderShape(vocab=0, dim=1024, layers=8, heads=16, kv_heads=16, hidden=2816)
TOKENS = 128
LIMIT_BYTES = 3 * 2**30

KITSUNE = f"""
import json, sys, time
sys.path.insert(0, {str(HERE)!r})
import torch
from torch import nn
from predict_models import Block, DecoderShape  # noqa: E402
from kitsune.predict.estimator import predict_memory
torch.set_num_threads(1)
shape = DecoderShape(**{SHAPE.__dict__!r})
with torch.device("meta"):
    model = nn.Sequential(*(Block(shape) for _ in range(shape.layers)))
wall, cpu = time.perf_counter(), time.process_time()
result = predict_memory(model, ({TOKENS}, shape.dim), optimizer="adamw", gpu="a100-80gb",
                        find_max_batch_size=True)
print(json.dumps({{"batch": result.max_batch_size, "wall": time.perf_counter() - wall,
                   "cpu": time.process_time() - cpu}}))
"""


def stack() -> nn.Module:
    return nn.Sequential(*(Block(SHAPE) for _ in range(SHAPE.layers)))


def step_factory(batch: int):
    def step() -> None:
        model = stack()
        optimizer = torch.optim.AdamW(model.parameters())
        model(torch.randn(batch, TOKENS, SHAPE.dim)).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def run_kitsune() -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", KITSUNE],
        capture_output=True,
        text=True,
        timeout=1800,
        preexec_fn=_limited,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    if done.returncode != 0:
        raise RuntimeError(f"kitsune child exited {done.returncode}:\n{done.stderr[-3000:]}")
    fallbacks = done.stderr.count("Traceback")
    record = json.loads(done.stdout.strip().splitlines()[-1])
    record["tracebacks_logged"] = fallbacks
    return record


def main() -> int:
    from kitsune.predict.gpu_database import get_gpu_spec

    torch.set_num_threads(1)
    spec = get_gpu_spec("a100-80gb")
    assert spec is not None
    capacity = int(spec.usable_vram_gb * 2**30)
    print(f"host load average before: {os.getloadavg()[0]:.1f}")
    kit = run_kitsune()
    print(
        f"kitsune: batch {kit['batch']}, {kit['wall']:.1f} s wall, {kit['cpu']:.1f} s CPU "
        f"({kit['tracebacks_logged']} estimator tracebacks logged)"
    )
    wall, cpu = time.perf_counter(), time.process_time()
    ours = max_batch_size(step_factory, capacity_bytes=capacity, device="cuda")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"ours: batch {ours.batch}, {len(ours.probes)} probes, {wall:.1f} s wall, {cpu:.1f} s CPU"
    )
    for probe in ours.probes:
        print(f"  probe {probe.batch}: {probe.peak.known_value:,} B fits={probe.fits}")
    batch = int(kit["batch"])
    if batch not in ours.curve:
        check = predict_peak_memory(step_factory(batch), device="cuda", capacity_bytes=capacity)
        print(f"  ours at kitsune's batch {batch}: {check.peak.known_value:,} B fits={check.fits}")
    print(f"capacity {capacity:,} B; host load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
