"""measure_flops on Hugging Face models built from config: exactness and overhead.

Run: ``python benchmarks/bench_hf.py [--repeats N] [--doc docs/benchmarks.md]``. The models,
their configs and the closed forms of their product FLOPs are those of the must-hold test
(tests/analysis/test_hf_operator_flops.py, loaded from its file: one source of truth). For
each model it prints the status of ``measure_flops``' total and products, the products'
ratio to the closed form and to torch's FlopCounterMode (as a user runs it: eval, no_grad,
CPU fast paths on), and the overhead ratio ``(measure_flops - bare) / (FlopCounterMode -
bare)`` on process CPU time, timed side by side and interleaved (bench_flops.bench). With
``--doc`` it replaces the HF section of that page (between the bench_hf markers; make bench's
tables.py keeps the section when it regenerates the page).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from bench_flops import bench  # benchmarks/bench_flops.py: the interleaved timer
from doc_sections import write_section  # benchmarks/doc_sections.py
from torch.utils.flop_counter import FlopCounterMode

from torchscan_stages.analysis.operators import measure_flops
from torchscan_stages.integrations.hf_models import build_hf_model

ROOT = Path(__file__).resolve().parents[1]


def _cases() -> dict[str, Any]:
    path = ROOT / "tests" / "analysis" / "test_hf_operator_flops.py"
    spec = importlib.util.spec_from_file_location("hf_must_hold", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return dict(module.CASES)


def _workload(case: Any) -> Callable[[], Any]:
    model = build_hf_model(case.config_class, **case.config)
    inputs = case.inputs()

    def forward() -> Any:
        with torch.no_grad():
            return model(**inputs)

    return forward


def _fcm_products(workload: Callable[[], Any]) -> int:
    with FlopCounterMode(display=False) as mode:
        workload()
    return int(mode.get_total_flops())


def measure(name: str, case: Any, repeats: int) -> dict[str, Any]:
    workload = _workload(case)
    report = measure_flops(workload)
    products = report.product_flops
    assert products is not None
    value = products.value if products.is_complete else products.known_value
    fcm = _fcm_products(workload)
    timings = bench(workload, repeats, inner=1)["cpu"]
    fcm_cost = timings["flop_counter_mode"] - timings["bare"]
    ours_cost = timings["measure_flops"] - timings["bare"]
    return {
        "model": name,
        "status": f"{report.total.status} / {products.status}",
        "closed_form": case.products,
        "products": value,
        "fcm": fcm,
        "bare_ms": timings["bare"] * 1e3,
        "fcm_ms": timings["flop_counter_mode"] * 1e3,
        "ours_ms": timings["measure_flops"] * 1e3,
        "overhead": ours_cost / fcm_cost if fcm_cost > 0 else float("nan"),
    }


def table(rows: list[dict[str, Any]], repeats: int) -> str:
    lines = [
        "## Hugging Face models from config: measure_flops vs closed form and FlopCounterMode",
        "",
        f"Run: {datetime.now(timezone.utc).isoformat(timespec='seconds')} by "
        f"`python benchmarks/bench_hf.py --repeats {repeats}` on {platform.machine()}, "
        f"{os.cpu_count()} logical cores (shared), torch {torch.__version__}, threads "
        f"{torch.get_num_threads()}. Configs and closed forms: "
        "tests/analysis/test_hf_operator_flops.py (width 32, 2 layers, batch 2, 8 tokens). "
        "Products = `measure_flops`' `product_flops`; FlopCounterMode as a user runs it (CPU "
        "fast paths on). Overhead = (measure_flops - bare) / (FlopCounterMode - bare), "
        "process CPU time, medians of interleaved samples.",
        "",
        "FlopCounterMode has no formula for the CPU flash-attention kernel "
        "(`_scaled_dot_product_flash_attention_for_cpu`) or `_grouped_mm`, so it drops every "
        "model's attention products and a MoE's expert products: a ratio above 1 in the "
        "FlopCounterMode column is work it does not count. The closed-form column is the "
        "exactness check.",
        "",
        "| model | status (total / products) | products / closed form | products / "
        "FlopCounterMode | bare ms | FlopCounterMode ms | measure_flops ms | overhead ratio |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| `{row['model']}` | {row['status']} | {row['products'] / row['closed_form']:.4f} "
            f"| {row['products'] / row['fcm']:.4f} | {row['bare_ms']:.2f} | {row['fcm_ms']:.2f} "
            f"| {row['ours_ms']:.2f} | {row['overhead']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--doc", type=Path, default=None)
    options = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for name, case in _cases().items():
        rows.append(measure(name, case, options.repeats))
        print(rows[-1], file=sys.stderr)
    section = table(rows, options.repeats)
    print(section)
    if options.doc is not None:
        write_section(options.doc, "bench_hf", section)


if __name__ == "__main__":
    main()
