"""Max-batch search for a 7B Llama-shaped decoder, FSDP2 on a fake world of 8: time and RSS.

Run: ``.venv/bin/python benchmarks/bench_capacity.py [CAPACITY_GIB]``. The model is built on
``meta`` in bf16 (weights, gradients and AdamW state bf16), ``fully_shard`` per block and
root, materialised with ``to_empty`` on fake tensors, sequence 4096, CUDA allocator model.
A fresh child runs ``max_batch_size`` and then the two direct predictions that check its
answer (the batch fits, the next one does not); ``measure_peak_rss`` gives the child's peak
RSS (imports included). The issue's budget: the search under 60 s and 2 GiB.
The capacity (default 80 GiB) is this benchmark's illustration, not a device's usable size.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import sys, time
sys.path.insert(0, {tests!r})
import torch
from predict_models import DecoderShape
from sharded_models import build_sharded
from torchscan_stages import max_batch_size, predict_sharded_peak_memory

torch.set_num_threads(1)
LLAMA_7B = DecoderShape(vocab=32000, dim=4096, layers=32, heads=32, kv_heads=32, hidden=11008)
CAPACITY = int(float(sys.argv[2]) * 2**30)


CALLS = []  # (batch, wall, CPU) as each probe begins: the search calls factory once a probe


def factory(batch):
    CALLS.append((batch, time.perf_counter(), time.process_time()))

    def step(mesh):
        before = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            model = build_sharded(mesh, LLAMA_7B)
        finally:
            torch.set_default_dtype(before)
        optimizer = torch.optim.AdamW(model.parameters())
        ids = torch.randint(0, LLAMA_7B.vocab, (batch, 4096))
        model(ids).float().pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
    return step


out = open(sys.argv[1], "w")
start, cpu_start = time.perf_counter(), time.process_time()
search = max_batch_size(factory, capacity_bytes=CAPACITY, device="cuda", world_size=8)
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
print(f"search {{elapsed:.1f}} s wall, {{cpu:.1f}} s CPU, {{len(search.probes)}} probes, "
      f"batch {{search.batch}}", file=out)
ends = CALLS[1:len(search.probes)] + [(None, start + elapsed, cpu_start + cpu)]
for (batch, wall_at, cpu_at), (_, wall_end, cpu_end) in zip(CALLS, ends):
    print(f"  probe batch {{batch}} took {{wall_end - wall_at:.1f}} s wall, "
          f"{{cpu_end - cpu_at:.1f}} s CPU", file=out)
for probe in search.probes:
    print(f"  probe batch {{probe.batch}}: {{probe.peak.known_value / 2**30:.2f}} GiB"
          f" ({{probe.peak.status}}) fits={{probe.fits}}", file=out)
if search.batch is not None:
    for batch in (search.batch, search.batch + 1):
        direct = predict_sharded_peak_memory(factory(batch), world_size=8, device="cuda",
                                             capacity_bytes=CAPACITY)
        steady = direct.steady_state_peak or direct.peak
        print(f"  direct batch {{batch}}: {{steady.known_value / 2**30:.2f}} GiB steady state"
              f" (first step {{direct.peak.known_value / 2**30:.2f}}) fits={{direct.fits}}",
              file=out)
out.close()
"""


def main() -> int:
    import os
    import tempfile

    from torchscan_stages import measure_peak_rss
    from torchscan_stages.render.format import iec_bytes

    capacity = sys.argv[1] if len(sys.argv) > 1 else "80"
    code = CHILD.format(tests=str(ROOT / "tests" / "predict"))
    print(f"host load average before: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as folder:
        said = Path(folder) / "child.txt"
        command = [sys.executable, "-c", code, str(said), capacity]
        report = measure_peak_rss(command, timeout=1800, name="max batch 7B FSDP2 world 8")
        if said.exists():
            print("child: " + said.read_text(encoding="utf-8").strip())
    print(f"host load average after: {os.getloadavg()[0]:.1f}")
    section = report.rss
    assert section is not None
    print(f"child exit code {section.exit_code}, wall time {section.wall_time_s:.1f} s")
    peak = section.peak
    shown = iec_bytes(peak.known_value) if peak.known_value is not None else "unavailable"
    print(f"child peak RSS {shown} ({peak.status})")
    return 0 if section.exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
