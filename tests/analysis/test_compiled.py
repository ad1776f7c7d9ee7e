"""Models compiled with the default inductor backend: measure_flops, crawl_module and
measure_workload count what the eager model counts, say how they analysed it, and leave the
compiled model as found: Dynamo's compile counters unchanged (no recompilation) and its
later calls still run the compiled graph (the profiler shows the compiled region)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn
from torch.profiler import profile

from torchscan_stages import crawl_module, measure_flops, measure_workload, predict_peak_memory

dynamo = pytest.importorskip("torch._dynamo")
pytestmark = [
    pytest.mark.slow,  # two inductor compiles on a loaded CPU: tens of seconds
    # inductor's own imports (torch.jit.script_method) and the OptimizedModule notice that
    # the crawl's global hooks fire for the wrapper too
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Using `torch.compile\\(module\\)`:UserWarning"),
]


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).eval()


def _cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()
    ).eval()


def _compile_counts() -> dict[str, Any]:
    counters = dynamo.utils.counters
    return {"frames": dict(counters["frames"]), "stats": dict(counters["stats"])}


def _runs_compiled(call: Callable[[], Any]) -> bool:
    with profile() as prof:
        call()
    return any("Torch-Compiled Region" in event.name for event in prof.events())


@pytest.mark.parametrize(("build", "shape"), [(_mlp, (16,)), (_cnn, (3, 8, 8))])
def test_inductor_model_counts_as_eager_and_is_left_as_found(
    build: Callable[[], nn.Module], shape: tuple[int, ...]
) -> None:
    torch.manual_seed(0)
    eager = build()
    x = torch.randn(2, *shape)

    def eager_call() -> Any:
        with torch.no_grad():
            return eager(x)

    eager_flops = measure_flops(eager_call)
    eager_crawl = crawl_module(eager, shape)
    compiled = torch.compile(eager)  # default backend: inductor

    def call() -> Any:
        with torch.no_grad():
            return compiled(x)

    call()  # compile and warm
    assert _runs_compiled(call)
    before = _compile_counts()

    flops = measure_flops(call)
    assert flops.total == eager_flops.total and flops.total.is_complete
    assert flops.product_flops == eager_flops.product_flops
    assert any(d.code == "compiled_code_eager" for d in flops.diagnostics)

    crawled = crawl_module(compiled, shape)
    assert crawled.totals.macs == eager_crawl.totals.macs
    assert crawled.totals.operator_flops == eager_crawl.totals.operator_flops
    assert any(d.code == "compiled_module_unwrapped" for d in crawled.diagnostics)

    workload = measure_workload(call, latency=False, progress=False)
    assert workload.flops is not None and workload.flops.total == eager_flops.total
    assert any(d.code == "compiled_code_eager" for d in workload.diagnostics)

    eager_peak = predict_peak_memory(eager_call, device="cpu")
    predicted = predict_peak_memory(call, device="cpu")
    # force_eager runs the compiled model's own Python: the eager step's bytes, but not
    # complete (an inductor graph keeps other intermediates), with the warning that says so
    assert eager_peak.peak.is_complete and eager_peak.peak.value is not None
    assert predicted.peak.status == "partial" and predicted.peak.value is None
    assert predicted.peak.known_value == eager_peak.peak.value
    codes = {d.code for d in predicted.diagnostics if d.severity == "warning"}
    assert "compiled_as_eager" in codes

    assert _compile_counts() == before  # no frame compiled again, no new graph
    assert _runs_compiled(call)  # still the compiled graph, not eager
    assert _compile_counts() == before
