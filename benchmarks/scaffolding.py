"""``bench_crawl.py --scaffolding``: what each speed shortcut of a crawl saves, A/B.

Each variant swaps one shortcut for the plain path it stands in front of, on bench_crawl's own
models, and times full ``crawl_module`` calls in interleaved rounds (rotating order) by process
CPU time. The figure is median(variant / current) over rounds: above 1 the shortcut saves that
much. Variants:

* ``records: checked path`` -- layer records built by ``report.trusted_construct``'s checked
  path (keys checked, state copied per call) instead of its ``in_order`` path;
* ``meta_of: no memo`` / ``call_meta: no memo`` -- hook values through
  ``to_value_meta(capture(...))``'s cache alone instead of the memo in front of it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from torchscan_stages.analysis import crawl, layer_records, recorder, tensor_meta
from torchscan_stages.analysis.crawl import crawl_module
from torchscan_stages.report import trusted_construct


def _plain_meta(value: Any) -> Any:
    return tensor_meta.to_value_meta(tensor_meta.capture(value))


def _plain_call_meta(args: Any, kwargs: Any) -> Any:
    return tensor_meta.to_value_meta(tensor_meta.call_capture(args, kwargs))


def _checked(cls: Any, values: dict[str, Any], *, in_order: bool = False) -> Any:
    return trusted_construct(cls, values)  # the per-call checks and copy, every time


SWAPS: dict[str, list[tuple[Any, str, Any]]] = {
    "records: checked path": [(layer_records, "trusted_construct", _checked)],
    "meta_of: no memo": [(recorder, "meta_of", _plain_meta)],
    "call_meta: no memo": [
        (recorder, "call_meta", _plain_call_meta),  # the hooks' keyword inputs
        (crawl, "call_meta", _plain_call_meta),  # the report's inputs
    ],
}


@contextmanager
def _swapped(name: str) -> Iterator[None]:
    saved = [(module, attr, getattr(module, attr)) for module, attr, _ in SWAPS.get(name, [])]
    for module, attr, plain in SWAPS.get(name, []):
        setattr(module, attr, plain)
    try:
        yield
    finally:
        for module, attr, value in saved:
            setattr(module, attr, value)


def _cpu(call: Callable[[], object]) -> float:
    start = time.process_time()
    call()
    return time.process_time() - start


def run(models: list[tuple[str, nn.Module, torch.Tensor, int]]) -> list[str]:
    """Markdown rows: model, rounds, then each variant's median CPU-time ratio to current."""
    names = ["current", *SWAPS]
    lines = [
        "| model | rounds | " + " | ".join(names[1:]) + " |",
        "|---|---|" + "---|" * len(SWAPS),
    ]
    for model_name, model, x, rounds in models:
        crawl_module(model, args=(x,))  # warm every cache once
        times: dict[str, list[float]] = {name: [] for name in names}

        def once(model: nn.Module = model, x: torch.Tensor = x) -> object:
            return crawl_module(model, args=(x,))

        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                with _swapped(name):
                    times[name].append(_cpu(once))
        cells = []
        for name in names[1:]:
            ratios = [v / c for v, c in zip(times[name], times["current"], strict=True)]
            cells.append(f"{statistics.median(ratios):.3f}x")
        lines.append(f"| {model_name} | {rounds} | " + " | ".join(cells) + " |")
    return lines
