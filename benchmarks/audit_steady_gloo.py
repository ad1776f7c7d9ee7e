"""Steady state per rank on Hugging Face families the tests do not use, against real gloo ranks.

Run: ``.venv/bin/python benchmarks/audit_steady_gloo.py [WORLD]`` (default 2). GPT-NeoX and
Qwen2 causal LMs built from small configs (d 64, 2 layers, vocab 512; batch 4 x 64 tokens,
the labels are the inputs), AdamW, under FSDP2 fp32, FSDP2 with bf16 ``MixedPrecisionPolicy``
and DDP. Real: WORLD processes on the gloo backend (``tests/predict/gloo_launch.py``: this
file is also the rank script), two steps of one model, each case under
``measure_peak_memory``, so the peak is the second step's. Predicted: ``predict_memory`` of
one step, rank 0, the steady-state headline. Prints one row per case: the first step's
prediction, the steady state, each rank's real two-step peak and the ratios.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "predict")]

VOCAB, BATCH, TOKENS = 512, 4, 64


def _build(family: str) -> Any:
    import transformers as hf

    shared = {
        "vocab_size": VOCAB,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 256,
        "max_position_embeddings": 128,
    }
    if family == "neox":
        return hf.GPTNeoXForCausalLM(hf.GPTNeoXConfig(**shared))
    return hf.Qwen2ForCausalLM(hf.Qwen2Config(num_key_value_heads=2, **shared))


def case(family: str, kind: str, steps: int) -> Callable[[Any], None]:
    """``step(mesh)`` (FSDP2) or ``step(wrap)`` (DDP) of ``steps`` steps on one model."""
    import torch

    def step(arg: Any) -> None:
        torch.manual_seed(0)
        model = _build(family)
        if kind == "ddp":
            model = arg(model)
        else:
            from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

            options: dict[str, Any] = {"mesh": arg}
            if kind == "bf16":
                options["mp_policy"] = MixedPrecisionPolicy(
                    param_dtype=torch.bfloat16, reduce_dtype=torch.float32
                )
            blocks = model.gpt_neox.layers if family == "neox" else model.model.layers
            for block in blocks:
                fully_shard(block, **options)
            fully_shard(model, **options)
        optimizer = torch.optim.AdamW(model.parameters())
        ids = torch.randint(0, VOCAB, (BATCH, TOKENS))
        for _ in range(steps):
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad()

    return step


CASES = [(family, kind) for family in ("neox", "qwen2") for kind in ("fp32", "bf16", "ddp")]


def _rank(rank: int, world: int, out: Path) -> None:
    from gloo_launch import measure_cases, write_record
    from torch.distributed.device_mesh import init_device_mesh
    from torch.nn.parallel import DistributedDataParallel

    mesh = init_device_mesh("cpu", (world,))
    cases = {
        f"{family}-{kind}": partial(
            case(family, kind, 2), DistributedDataParallel if kind == "ddp" else mesh
        )
        for family, kind in CASES
    }
    write_record(out, rank, measure_cases(cases))


def main(world: int) -> None:
    from gloo_launch import launch_world

    from torchscan_stages.predict.entry import predict_memory

    with tempfile.TemporaryDirectory() as folder:
        records = launch_world(Path(__file__), world, Path(folder))
    print("| case | ranks | first step | steady state | real two steps (each rank) | ratio |")
    print("| --- | ---: | ---: | ---: | --- | ---: |")
    for family, kind in CASES:
        name = f"{family}-{kind}"
        real = [int(r["cases"][name]["peak"]) for r in records]
        sharding = "ddp" if kind == "ddp" else "fsdp2"
        report = predict_memory(
            case(family, kind, 1), sharding=sharding, world_size=world, device="cpu"
        )
        steady = report.steady_state_peak
        assert steady is not None and steady.value is not None and report.peak.value
        print(
            f"| {name} | {world} | {report.peak.value:,} | {steady.value:,} ({steady.status}) "
            f"| {', '.join(f'{v:,}' for v in sorted(set(real)))} | {steady.value / real[0]:.4f} |"
        )


if __name__ == "__main__":
    if len(sys.argv) == 4:  # the rank script: WORLD PORT OUT
        import torch._dynamo
        import torch.distributed.fsdp  # noqa: F401
        import transformers  # noqa: F401
        from gloo_launch import fork_world

        import torchscan_stages.measure.memory  # noqa: F401

        sys.exit(fork_world(sys.argv, _rank))
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
