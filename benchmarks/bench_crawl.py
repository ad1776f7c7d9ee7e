"""crawl_module overhead vs a plain no_grad forward (1 thread), and per-layer cost scaling.

Targets: full <= 1.3x and structure <= 1.15x a plain forward on a ResNet-50-shaped CNN and a
4-layer Transformer encoder; per-layer cost flat from 100 to 5000 layers; per-layer operator
FLOPs (own and inclusive in every record) add at most 5% to a full crawl of GPT-2 and the
ResNet-50-shaped CNN (measured against the same crawl with that step switched off, the two
interleaved). Prints ratios; it is a benchmark script, not a timed test. ``--quick`` uses
fewer repeats.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from models import resnet50_shaped, transformer_encoder  # benchmarks/models.py: one model set
from torch import nn

from torchscan_stages.analysis import layer_records
from torchscan_stages.analysis.crawl import crawl_module


def deep_mlp(n: int) -> nn.Module:
    return nn.Sequential(*[nn.Linear(16, 16) for _ in range(n)])


def best_of(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def overhead(name: str, model: nn.Module, x: torch.Tensor, repeats: int) -> None:
    model.eval()

    def plain() -> None:
        with torch.no_grad():
            model(x)

    base = best_of(plain, repeats)
    full = best_of(lambda: crawl_module(model, args=(x,)), repeats)
    struct = best_of(lambda: crawl_module(model, args=(x,), mode="structure"), repeats)
    print(
        f"{name:<22} plain {base * 1e3:8.2f} ms  full {full / base:5.2f}x (target 1.30)  "
        f"structure {struct / base:5.2f}x (target 1.15)"
    )


def _gpt2() -> tuple[nn.Module, dict[str, torch.Tensor]] | None:
    try:
        from torchscan_stages.integrations.hf_models import build_hf_model, token_inputs
    except ImportError:
        return None
    config = {"n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257}
    model = build_hf_model("GPT2Config", model_class="AutoModelForCausalLM", **config)
    return model, token_inputs(batch_size=1, seq_len=128, vocab_size=50257)


def attribution_overhead(name: str, run: Callable[[], object], repeats: int) -> None:
    """Share of a full crawl spent on the per-layer operator FLOPs, two ways.

    Timed inside: the step itself (``layer_records.operator_flops``, wrapped with a timer)
    against the whole crawl, which is robust on a loaded machine; and side by side: crawls
    with the step against crawls with it switched off, interleaved (noisier).
    """
    attribute = layer_records.operator_flops
    inside: list[float] = []

    def timed(*args: object) -> object:
        start = time.perf_counter()
        try:
            return attribute(*args)  # type: ignore[arg-type]
        finally:
            inside.append(time.perf_counter() - start)

    with_step, without = [], []
    run()  # warm-up
    try:
        for _ in range(repeats):
            for switched_off, times in ((False, with_step), (True, without)):
                layer_records.operator_flops = (  # type: ignore[assignment]
                    (lambda calls, owner_ops: None) if switched_off else timed
                )
                start = time.perf_counter()
                run()
                times.append(time.perf_counter() - start)
    finally:
        layer_records.operator_flops = attribute  # type: ignore[assignment]
    crawl, step = statistics.median(with_step), statistics.median(inside)
    print(
        f"{name:<22} per-layer operator FLOPs: crawl {crawl * 1e3:8.1f} ms, step "
        f"{step * 1e3:6.2f} ms -> {1 + step / (crawl - step):5.3f}x timed inside, "
        f"{crawl / statistics.median(without):5.3f}x side by side (target 1.05)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    repeats = 3 if options.quick else 7
    torch.set_num_threads(1)
    cnn, image = resnet50_shaped().eval(), torch.randn(1, 3, 224, 224)
    attribution_overhead("resnet50-shaped 224", lambda: crawl_module(cnn, args=(image,)), repeats)
    gpt2 = _gpt2()
    if gpt2 is not None:
        model, tokens = gpt2
        attribution_overhead("gpt2 124M L128", lambda: crawl_module(model, kwargs=tokens), repeats)
    overhead("resnet50-shaped 224", resnet50_shaped(), torch.randn(1, 3, 224, 224), repeats)
    overhead("transformer 4x256 L128", transformer_encoder(), torch.randn(1, 128, 256), repeats)
    x = torch.randn(1, 16)
    for n in (100, 1000, 5000):
        model = deep_mlp(n)

        def run_full(m: nn.Module = model) -> object:
            return crawl_module(m, args=(x,))

        def run_structure(m: nn.Module = model) -> object:
            return crawl_module(m, args=(x,), mode="structure")

        full = best_of(run_full, max(1, repeats // 2))
        struct = best_of(run_structure, max(1, repeats // 2))
        print(
            f"{n:>5} layers: full {full / n * 1e6:7.1f} us/layer  "
            f"structure {struct / n * 1e6:7.1f} us/layer"
        )


if __name__ == "__main__":
    main()
