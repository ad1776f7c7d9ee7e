"""Predict a 70B Llama-shaped training step on fake tensors: wall time and peak RSS.

Run: ``.venv/bin/python benchmarks/bench_predict.py``. The prediction (bf16 weights and
gradients, fp32 master weights and AdamW moments, batch 1, sequence 2048, CUDA allocator
model; ``tests/predict/predict_models.mixed_precision_step``) runs in a fresh child
process so its peak RSS is its own, measured by ``measure_peak_rss`` (imports included);
the child writes its own wall time of the prediction and the predicted peak. The issue's
budget on the 2-core development machine: under 30 s and under 1 GiB peak RSS.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import sys, time
sys.path.insert(0, {tests!r})
import torch
from predict_models import LLAMA_70B as S, mixed_precision_step
from torchscan_stages import predict_peak_memory

torch.set_num_threads(1)


def step():
    mixed_precision_step(S, batch=1, tokens=2048)


start = time.perf_counter()
report = predict_peak_memory(step, device="cuda")
elapsed = time.perf_counter() - start
out = open(sys.argv[1], "w")
gib = report.peak.value / 2**30
print(f"prediction wall time {{elapsed:.1f}} s; predicted peak {{gib:,.1f}} GiB"
      f" ({{report.peak.status}}, at {{report.phase_at_peak}})", file=out)
out.close()
"""


def main() -> int:
    import tempfile

    from torchscan_stages import measure_peak_rss
    from torchscan_stages.render.format import iec_bytes

    code = CHILD.format(tests=str(ROOT / "tests" / "predict"))
    with tempfile.TemporaryDirectory() as folder:
        said = Path(folder) / "child.txt"
        command = [sys.executable, "-c", code, str(said)]
        report = measure_peak_rss(command, timeout=600, name="predict 70B")
        if said.exists():
            print("child: " + said.read_text(encoding="utf-8").strip())
    section = report.rss
    assert section is not None
    print(f"child exit code {section.exit_code}, wall time {section.wall_time_s:.1f} s")
    peak = section.peak
    shown = iec_bytes(peak.known_value) if peak.known_value is not None else "unavailable"
    print(f"child peak RSS {shown} ({peak.status})")
    for diagnostic in report.diagnostics:
        print(f"  {diagnostic.code}: {diagnostic.message}")
    return 0 if section.exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
