"""Time render_report on a 5,000-layer AnalysisReport; the budget is < 2 s and < 5 MB.

Run: ``.venv/bin/python benchmarks/bench_render.py [--layers N] [--repeat R]``. The report is
synthetic (built from the wire models, a ResNet-like stage/block/leaf nesting with one
unsupported module) so the benchmark does not depend on the crawl engine's speed. Prints the
best and median wall time of ``repeat`` renders after one warm-up render (template
compilation), and the page size.
"""

from __future__ import annotations

import argparse
import statistics
import time

from torchscan_stages.provenance import build_provenance
from torchscan_stages.render import render_report
from torchscan_stages.report import (
    AnalysisReport,
    AnalysisTotals,
    Diagnostic,
    LayerMetrics,
    LayerRecord,
    MetricResult,
    ParameterStats,
    ValueMeta,
    combine_sum,
)

MF = {"unit": "FLOPs", "scope": "forward", "method": "module_formula"}
MAC = {"unit": "MACs", "scope": "forward", "method": "module_formula"}
DMA = {"unit": "DMAs", "scope": "forward", "method": "module_formula"}
RF = {"unit": "pixels", "scope": "forward", "method": "module_formula"}
STATE = {"scope": "model", "method": "module_state"}


def _record(path: str, depth: int, kind: str, leaf: bool, cin: int, cout: int) -> LayerRecord:
    macs = cout * 16 * 16 * cin * 9 if kind == "Conv2d" else 0
    params = cout * cin * 9 if kind == "Conv2d" else 0
    if kind == "Mystery":
        metrics = {k: MetricResult.unavailable(**MF) for k in ("module_flops",)}
        metrics |= {
            "macs": MetricResult.unavailable(**MAC),
            "dmas": MetricResult.unavailable(**DMA),
        }
    elif leaf:
        metrics = {
            "module_flops": MetricResult.complete(2 * macs or cout * 256, **MF),
            "macs": MetricResult.complete(macs, **MAC),
            "dmas": MetricResult.complete(4 * params + cout * 256, **DMA),
        }
    else:
        metrics = {
            "module_flops": MetricResult.unavailable(**MF),
            "macs": MetricResult.unavailable(**MAC),
            "dmas": MetricResult.unavailable(**DMA),
        }
    shape = ValueMeta(kind="tensor", shape=[1, cout, 16, 16], dtype="float32", device="cpu")
    return LayerRecord(
        path=path,
        call_index=0,
        name=path.rsplit(".", 1)[-1],
        depth=depth,
        type=kind,
        is_leaf=leaf,
        input=shape,
        output=shape,
        params=ParameterStats(
            parameters=params,
            trainable_parameters=params,
            parameter_bytes=4 * params,
            buffer_elements=0,
            buffer_bytes=0,
        ),
        metrics=LayerMetrics(
            **metrics,
            receptive_field=MetricResult.complete(3, **RF),
            effective_stride=MetricResult.complete(1, **RF),
            effective_padding=MetricResult.complete(1, **RF),
        ),
    )


def synthetic_report(count: int) -> AnalysisReport:
    layers = [_record("", 0, "Net", False, 3, 64)]
    stage = 0
    while len(layers) < count:
        layers.append(_record(f"stage{stage}", 1, "Sequential", False, 64, 64))
        for b in range(8):
            base = f"stage{stage}.{b}"
            layers.append(_record(base, 2, "Bottleneck", False, 64, 64))
            for leaf, kind in (
                ("conv1", "Conv2d"),
                ("relu", "ReLU"),
                ("conv2", "Conv2d"),
                ("bn", "BatchNorm2d"),
                ("odd", "Mystery"),
            ):
                layers.append(_record(f"{base}.{leaf}", 3, kind, True, 64, 64))
        stage += 1
    layers = layers[:count]
    leaves = [r for r in layers if r.is_leaf]
    params = sum(r.params.parameters for r in layers)

    def state(value: int, unit: str) -> MetricResult:
        return MetricResult.complete(value, unit=unit, **STATE)

    totals = AnalysisTotals(
        parameters=state(params, "parameters"),
        trainable_parameters=state(params, "parameters"),
        frozen_parameters=state(0, "parameters"),
        parameter_bytes=state(4 * params, "bytes"),
        buffer_elements=state(0, "elements"),
        buffer_bytes=state(0, "bytes"),
        module_flops=combine_sum([r.metrics.module_flops for r in leaves], **MF),
        macs=combine_sum([r.metrics.macs for r in leaves], **MAC),
        dmas=combine_sum([r.metrics.dmas for r in leaves], **DMA),
        operator_flops=MetricResult.unavailable(
            unit="FLOPs", scope="forward", method="operator_dispatch"
        ),
    )
    diagnostics = [
        Diagnostic(
            code="unsupported_module",
            metric="module_flops",
            path=r.path,
            message="no handler for Mystery",
        )
        for r in leaves
        if r.type == "Mystery"
    ]
    return AnalysisReport(
        provenance=build_provenance(),
        diagnostics=diagnostics,
        model_type="Net",
        mode="full",
        inputs=layers[0].input,
        layers=layers,
        totals=totals,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    report = synthetic_report(args.layers)
    html = render_report(report)  # warm-up: template compilation
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        html = render_report(report)
        times.append(time.perf_counter() - start)
    size = len(html.encode("utf-8"))
    print(
        f"render_report: {len(report.layers):,} layers, {len(report.diagnostics):,} diagnostics: "
        f"best {min(times):.3f} s, median {statistics.median(times):.3f} s over {args.repeat}; "
        f"page {size:,} bytes ({size / 1e6:.2f} MB); budget < 2 s and < 5 MB: "
        f"{'ok' if max(times) < 2 and size < 5_000_000 else 'OVER BUDGET'}"
    )


if __name__ == "__main__":
    main()
