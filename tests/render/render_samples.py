"""Sample reports for the rendering tests, built directly from the wire models.

The numbers follow the project's conventions so the pages read like real ones: a FLOP is a
multiply or an add (one MAC = 2 FLOPs); conv MACs = C_out * H_out * W_out * C_in * k * k.
Some metrics are deliberately partial or unavailable, and one module type and one diagnostic
message carry ``<script>`` to prove escaping.
"""

from __future__ import annotations

import math
import statistics

from torchscan_stages.report import (
    AnalysisReport,
    AnalysisTotals,
    BenchmarkComparison,
    BenchmarkReport,
    CheckResult,
    Diagnostic,
    EnvironmentInfo,
    ExecutionRecord,
    FlopReport,
    IgnoredOperator,
    LatencySection,
    LatencyStats,
    LayerChange,
    LayerKey,
    LayerMetrics,
    LayerRecord,
    MemorySection,
    MetricDelta,
    MetricResult,
    OperatorCount,
    ParameterStats,
    PerformanceDelta,
    PredictionReport,
    ProfiledOperator,
    ProfileSection,
    Provenance,
    ReportDiff,
    RssPhase,
    RssSection,
    RunContext,
    RuntimeState,
    ValueMeta,
)
from torchscan_stages.report.history import (
    HistoryCommit,
    HistoryPoint,
    HistoryReport,
    HistorySegment,
    HistorySeries,
    HistoryStep,
)

EVIL = "<script>alert(1)</script>"
MF = {"unit": "FLOPs", "scope": "forward", "method": "module_formula"}
MACS = {"unit": "MACs", "scope": "forward", "method": "module_formula"}
DMAS = {"unit": "DMAs", "scope": "forward", "method": "module_formula"}
OPF = {"unit": "FLOPs", "scope": "forward", "method": "operator_dispatch"}
RF = {"unit": "pixels", "scope": "forward", "method": "module_formula"}


def provenance(config: dict[str, object] | None = None, stage: str = "crawl") -> Provenance:
    """Fixed provenance so pages do not depend on the machine running the tests."""
    env = EnvironmentInfo(
        python_version="3.11.9",
        python_implementation="CPython",
        platform="Linux-6.1",
        machine="x86_64",
        cpu_model="Example CPU @ 2.40GHz",
        cpu_count_logical=16,
        cpu_count_physical=8,
        torch_version="2.13.0",
        package_version="0.1.0",
        packages={"torch": "2.13.0", "numpy": "2.1.0"},
    )
    run = RunContext(
        config=config if config is not None else {"model": {"name": "tinynet"}, "seed": 0},
        model_name="tinynet",
        model_revision="r3",
        input_name="image32",
        input_revision="r1",
        seed=0,
        git_commit="0123456789abcdef0123456789abcdef01234567",
        git_dirty=False,
        stage=stage,
    )
    runtime = RuntimeState(
        num_threads=4,
        num_interop_threads=4,
        grad_enabled=False,
        deterministic_algorithms=False,
        default_dtype="float32",
    )
    return Provenance(
        package_version="0.1.0",
        torch_version="2.13.0",
        env_hash="a1b2c3d4e5f60718",
        environment=env,
        runtime=runtime,
        run=run,
    )


def tensor(*shape: int) -> ValueMeta:
    return ValueMeta(
        kind="tensor", shape=list(shape), dtype="float32", device="cpu", requires_grad=False
    )


def _metric(kwargs: dict[str, str], value: int | None, status: str = "complete") -> MetricResult:
    if status == "unavailable" or value is None:
        return MetricResult.unavailable(**kwargs)
    if status == "partial":
        return MetricResult.partial(value, **kwargs)
    return MetricResult.complete(value, **kwargs)


def layer(
    path: str,
    depth: int,
    type_: str,
    out: tuple[int, ...],
    *,
    params: int = 0,
    flops: int | None = 0,
    macs: int | None = 0,
    status: str = "complete",
    leaf: bool = True,
    call_index: int = 0,
    rf: int | None = 1,
) -> LayerRecord:
    name = path.rsplit(".", 1)[-1] if path else ""
    return LayerRecord(
        path=path,
        call_index=call_index,
        name=name,
        depth=depth,
        type=type_,
        is_leaf=leaf,
        input=tensor(1, 3, 32, 32),
        output=tensor(*out),
        params=ParameterStats(
            parameters=params,
            trainable_parameters=params,
            parameter_bytes=4 * params,
            buffer_elements=0,
            buffer_bytes=0,
        ),
        metrics=LayerMetrics(
            module_flops=_metric(MF, flops, status),
            macs=_metric(MACS, macs, status),
            dmas=_metric(DMAS, None if status == "unavailable" else 4 * params, status),
            receptive_field=_metric(RF, rf, "complete" if rf is not None else "unavailable"),
            effective_stride=_metric(RF, 1),
            effective_padding=_metric(RF, 0),
        ),
    )


def _conv(path: str, depth: int, cin: int, cout: int, hw: int) -> LayerRecord:
    macs = cout * hw * hw * cin * 9  # 3x3 kernel, stride 1, padding 1
    return layer(
        path,
        depth,
        "Conv2d",
        (1, cout, hw, hw),
        params=cout * cin * 9,
        flops=2 * macs,
        macs=macs,
        rf=3,
    )


def analysis_report(blocks: int = 2) -> AnalysisReport:
    """TinyNet: stem conv, ``blocks`` residual-like blocks, an unsupported module, a head.

    stem Conv2d(3, 16): MACs = 16*32*32*3*9 = 442,368; FLOPs 884,736; params 16*3*9 = 432.
    each block Conv2d(16, 16): MACs = 16*32*32*16*9 = 2,359,296; FLOPs 4,718,592; params 2,304.
    fc Linear(16, 10): MACs 160, FLOPs 320, params 16*10 + 10 = 170.
    """
    layers = [
        layer("", 0, "TinyNet", (1, 10), leaf=False, flops=None, macs=None, status="unavailable"),
        _conv("stem", 1, 3, 16, 32),
        layer("stem_act", 1, "ReLU", (1, 16, 32, 32), flops=16384, macs=0),
        layer(
            "blocks",
            1,
            "Sequential",
            (1, 16, 32, 32),
            leaf=False,
            flops=None,
            macs=None,
            status="unavailable",
        ),
    ]
    for b in range(blocks):
        layers.append(
            layer(
                f"blocks.{b}",
                2,
                "Block",
                (1, 16, 32, 32),
                leaf=False,
                flops=None,
                macs=None,
                status="unavailable",
            )
        )
        layers.append(_conv(f"blocks.{b}.conv", 3, 16, 16, 32))
        layers.append(layer(f"blocks.{b}.act", 3, "ReLU", (1, 16, 32, 32), flops=16384, macs=0))
    layers += [
        layer(
            "blocks.odd",
            2,
            EVIL,
            (1, 16, 32, 32),
            status="unavailable",
            flops=None,
            macs=None,
            rf=None,
        ),
        layer("pool", 1, "AdaptiveAvgPool2d", (1, 16, 1, 1), flops=16384, macs=0),
        layer("fc", 1, "Linear", (1, 10), params=170, flops=320, macs=160),
    ]
    counted = [r for r in layers if r.is_leaf]
    flops = sum(r.metrics.module_flops.known_value or 0 for r in counted)
    macs = sum(r.metrics.macs.known_value or 0 for r in counted)
    dmas = sum(r.metrics.dmas.known_value or 0 for r in counted)
    params = sum(r.params.parameters for r in layers)
    totals = AnalysisTotals(
        parameters=MetricResult.complete(
            params, unit="parameters", scope="model", method="module_state"
        ),
        trainable_parameters=MetricResult.complete(
            params, unit="parameters", scope="model", method="module_state"
        ),
        frozen_parameters=MetricResult.complete(
            0, unit="parameters", scope="model", method="module_state"
        ),
        parameter_bytes=MetricResult.complete(
            4 * params, unit="bytes", scope="model", method="module_state"
        ),
        buffer_elements=MetricResult.complete(
            0, unit="elements", scope="model", method="module_state"
        ),
        buffer_bytes=MetricResult.complete(0, unit="bytes", scope="model", method="module_state"),
        module_flops=MetricResult.partial(flops, **MF),
        macs=MetricResult.partial(macs, **MACS),
        dmas=MetricResult.partial(dmas, **DMAS),
        operator_flops=MetricResult.unavailable(**OPF),
    )
    diagnostics = [
        Diagnostic(
            code="unsupported_module",
            severity="warning",
            metric="module_flops",
            message=f"no handler for module type {EVIL}; its FLOPs are unknown",
            path="blocks.odd",
        ),
        Diagnostic(
            code="operator_pass_skipped",
            severity="info",
            metric="operator_flops",
            message="operator FLOPs were not requested for this call",
        ),
    ]
    return AnalysisReport(
        provenance=provenance(),
        diagnostics=diagnostics,
        model_type="TinyNet",
        mode="full",
        inputs=ValueMeta(kind="tuple", items=[tensor(1, 3, 32, 32)]),
        layers=layers,
        totals=totals,
        conventions={"flop": "one multiply or one add; 1 MAC = 2 FLOPs"},
    )


def big_analysis_report(target_layers: int = 5000) -> AnalysisReport:
    """A deep, wide model with ``target_layers`` records (stages > blocks > leaves)."""
    report = analysis_report(blocks=1)
    layers: list[LayerRecord] = [report.layers[0]]
    stage = 0
    while len(layers) < target_layers:
        layers.append(
            layer(
                f"stage{stage}",
                1,
                "Sequential",
                (1, 64, 16, 16),
                leaf=False,
                flops=None,
                macs=None,
                status="unavailable",
            )
        )
        for b in range(8):
            base = f"stage{stage}.{b}"
            layers.append(
                layer(
                    base,
                    2,
                    "Bottleneck",
                    (1, 64, 16, 16),
                    leaf=False,
                    flops=None,
                    macs=None,
                    status="unavailable",
                )
            )
            layers.append(_conv(f"{base}.conv1", 3, 64, 64, 16))
            layers.append(
                layer(
                    f"{base}.bn1",
                    3,
                    "BatchNorm2d",
                    (1, 64, 16, 16),
                    params=128,
                    flops=2 * 64 * 256,
                    macs=64 * 256,
                )
            )
            layers.append(layer(f"{base}.relu", 3, "ReLU", (1, 64, 16, 16), flops=64 * 256))
            layers.append(_conv(f"{base}.conv2", 3, 64, 64, 16))
            layers.append(
                layer(f"{base}.relu", 3, "ReLU", (1, 64, 16, 16), flops=64 * 256, call_index=1)
            )
        stage += 1
    return report.model_copy(update={"layers": layers[:target_layers]})


def flop_report() -> FlopReport:
    """addmm for Linear(16, 10) at batch 1: 2*1*16*10 = 320 FLOPs; conv 884,736 as above."""
    by_operator = {
        "aten.convolution": OperatorCount(calls=3, flops=MetricResult.complete(10_321_920, **OPF)),
        "aten.addmm": OperatorCount(calls=1, flops=MetricResult.complete(320, **OPF)),
        "aten.relu": OperatorCount(calls=3, flops=MetricResult.complete(49_152, **OPF)),
        EVIL: OperatorCount(calls=1, flops=MetricResult.unavailable(**OPF)),
    }
    return FlopReport(
        provenance=provenance(stage="flops"),
        diagnostics=[
            Diagnostic(
                code="uncounted_operator",
                severity="warning",
                metric="total",
                message=f"operator {EVIL} has no FLOP formula",
                operator=EVIL,
                count=1,
            )
        ],
        name="tinynet forward",
        total=MetricResult.partial(10_371_392, **OPF),
        by_operator=by_operator,
        by_module={
            "stem": MetricResult.complete(884_736, **OPF),
            "fc": MetricResult.complete(320, **OPF),
        },
        ignored_operators=[
            IgnoredOperator(operator="aten.view", calls=2, reason="metadata only"),
            IgnoredOperator(operator="aten.t", calls=1, reason="metadata only"),
        ],
        conventions={"flop": "one multiply or one add"},
    )


def block_times(median: float, n: int = 40) -> list[float]:
    """Deterministic, slightly skewed block averages around ``median`` (seconds)."""
    return [median * (1 + 0.04 * math.sin(i * 1.7) + 0.02 * ((i * 7) % 5) / 5) for i in range(n)]


def _stats(times: list[float], calls_per_block: int) -> LatencyStats:
    ordered = sorted(times)
    q = statistics.quantiles(ordered, n=4, method="inclusive")
    return LatencyStats(
        median=statistics.median(ordered),
        q1=q[0],
        q3=q[2],
        iqr=q[2] - q[0],
        min=ordered[0],
        max=ordered[-1],
        mean=statistics.fmean(ordered),
        blocks=len(ordered),
        calls_per_block=calls_per_block,
        warmup_calls=10,
        total_time_s=sum(ordered) * calls_per_block,
    )


def benchmark_report(
    *,
    threads: int = 4,
    precision: str = "fp32",
    median: float = 0.0123,
    work: int = 32,
    name: str | None = None,
) -> BenchmarkReport:
    """Latency, memory (one unavailable scope), RSS with phases, profiler and FLOPs."""
    times = block_times(median)
    stats = _stats(times, calls_per_block=8)
    warmed = MetricResult.complete(
        stats.median, unit="s", scope="warmed_block_average", method="perf_counter"
    )
    throughput = MetricResult.complete(
        work / stats.median, unit="samples/s", scope="warmed_block_average", method="perf_counter"
    )
    config = {
        "threads": threads,
        "precision": {"name": precision, "dtype": precision},
        "model": {"name": "tinynet"},
    }
    return BenchmarkReport(
        provenance=provenance(config=config, stage="latency"),
        diagnostics=[
            Diagnostic(
                code="no_accelerator",
                severity="info",
                metric="accelerator_allocated",
                message="no CUDA device: accelerator memory was not measured",
            ),
        ],
        name=name or f"tinynet {precision} x{threads}",
        work_units=work,
        unit="samples",
        execution=ExecutionRecord(
            device="cpu",
            precision=precision,
            num_threads=threads,
            num_interop_threads=1,
            threads=threads,
            grad_enabled=False,
            training=False,
            calls={"latency": 330, "memory": 1},
        ),
        latency=LatencySection(
            first_call=MetricResult.complete(
                0.2345, unit="s", scope="first_call", method="perf_counter"
            ),
            warmed=warmed,
            throughput=throughput,
            stats=stats,
            block_times_s=times,
            timer="time.perf_counter",
            synchronized=False,
            settings={"min_run_time": 0.5, "warmup": 10},
        ),
        memory=MemorySection(
            results=[
                MetricResult.complete(
                    46_827_520,
                    unit="bytes",
                    scope="cpu_tracked_tensors",
                    method="dispatch_tracking",
                ),
                MetricResult.unavailable(
                    unit="bytes", scope="accelerator_allocated", method="allocator_stats"
                ),
            ],
            baseline_bytes={"cpu_tracked_tensors": 1_048_576},
        ),
        rss=RssSection(
            peak=MetricResult.complete(
                412_000_256, unit="bytes", scope="process_rss", method="os_accounting"
            ),
            command=["python", "-m", "torchscan_stages.stages.rss", f"threads={threads}"],
            exit_code=0,
            wall_time_s=3.21,
            timed_out=False,
            timeout_s=120.0,
            phases=[
                RssPhase(
                    name="import",
                    peak_rss=MetricResult.complete(
                        301_989_888, unit="bytes", scope="process_rss", method="os_accounting"
                    ),
                ),
                RssPhase(
                    name="load",
                    peak_rss=MetricResult.complete(
                        352_321_536, unit="bytes", scope="process_rss", method="os_accounting"
                    ),
                ),
                RssPhase(
                    name="run",
                    peak_rss=MetricResult.partial(
                        412_000_256, unit="bytes", scope="process_rss", method="os_accounting"
                    ),
                ),
            ],
        ),
        profile=ProfileSection(
            sort_by="self_cpu_time_total",
            operators=[
                ProfiledOperator(
                    name="aten::mkldnn_convolution",
                    calls=3,
                    self_cpu_time_s=0.0061,
                    cpu_time_total_s=0.0064,
                    input_shapes=["[1, 16, 32, 32]", "[16, 16, 3, 3]"],
                ),
                ProfiledOperator(
                    name="aten::addmm",
                    calls=1,
                    self_cpu_time_s=0.00004,
                    cpu_time_total_s=0.00005,
                    input_shapes=["[10]", "[1, 16]"],
                ),
            ],
        ),
        flops=flop_report(),
    )


def report_diff() -> ReportDiff:
    """Before 5,603,328 -> after 10,321,920 known FLOPs; one side partial gives no delta."""
    before = MetricResult.complete(5_603_328, **MF)
    after = MetricResult.complete(10_321_920, **MF)
    params_before = MetricResult.complete(
        2_906, unit="parameters", scope="model", method="module_state"
    )
    params_after = MetricResult.complete(
        5_210, unit="parameters", scope="model", method="module_state"
    )
    return ReportDiff(
        provenance=provenance(stage="compare"),
        before_model="TinyNet",
        after_model="TinyNetWide",
        totals={
            "module_flops": complete_delta(before, after),
            "parameters": complete_delta(params_before, params_after),
            "macs": MetricDelta(
                before=MetricResult.partial(100, **MACS),
                after=MetricResult.complete(200, **MACS),
                delta=None,
                ratio=None,
                status="partial",
            ),
        },
        added=[LayerKey(path="blocks.2.conv", call_index=0, type="Conv2d")],
        removed=[LayerKey(path="blocks.odd", call_index=0, type=EVIL)],
        changed=[
            LayerChange(
                path="stem",
                call_index=0,
                type_before="Conv2d",
                type_after="Conv2d",
                metrics={
                    "module_flops": complete_delta(
                        MetricResult.complete(884_736, **MF), MetricResult.complete(1_769_472, **MF)
                    )
                },
            )
        ],
        before_env_hash="a1b2c3d4e5f60718",
        after_env_hash="a1b2c3d4e5f60718",
    )


def complete_delta(before: MetricResult, after: MetricResult) -> MetricDelta:
    b, a = before.value, after.value
    assert b is not None and a is not None
    return MetricDelta(
        before=before, after=after, delta=a - b, ratio=a / b if b else None, status="complete"
    )


def comparison(*, check_passed: bool = False) -> BenchmarkComparison:
    """Failed check: every delta withheld even though the candidate looks 1.8x faster."""
    base = benchmark_report(median=0.0123, name="baseline fp32")
    cand = benchmark_report(median=0.0068, name="candidate int8")
    lat_b = base.latency.warmed if base.latency else None
    lat_c = cand.latency.warmed if cand.latency else None
    assert lat_b is not None and lat_c is not None
    ratio = (lat_c.value or 0) / (lat_b.value or 1)
    withheld = not check_passed
    deltas = [
        PerformanceDelta(
            metric="warmed_latency",
            unit="s",
            scope="warmed_block_average",
            method="perf_counter",
            baseline=lat_b,
            candidate=lat_c,
            ratio=ratio,
            ci_low=ratio * 0.97,
            ci_high=ratio * 1.03,
            confidence=0.95,
            verdict="withheld" if withheld else "faster",
            withheld=withheld,
            reason="output check failed" if withheld else None,
        ),
        PerformanceDelta(
            metric="peak_rss",
            unit="bytes",
            scope="process_rss",
            method="os_accounting",
            baseline=MetricResult.complete(
                412_000_256, unit="bytes", scope="process_rss", method="os_accounting"
            ),
            candidate=MetricResult.unavailable(
                unit="bytes", scope="process_rss", method="os_accounting"
            ),
            ratio=None,
            verdict="withheld" if withheld else "not_comparable",
            withheld=withheld,
            reason="candidate child exited non-zero",
        ),
    ]
    check = CheckResult(
        performed=True,
        passed=check_passed,
        detail="max abs diff 0.31 > atol 0.01" if not check_passed else "max abs diff 0.002",
        tolerance={"atol": 0.01, "rtol": 0.0},
    )
    return BenchmarkComparison(
        provenance=provenance(stage="compare"),
        diagnostics=[
            Diagnostic(
                code="child_exit_nonzero",
                severity="error",
                metric="peak_rss",
                message="candidate RSS child exited with code 1",
            )
        ],
        baseline_name="baseline fp32",
        candidate_name="candidate int8",
        check=check,
        deltas=deltas,
        settings={"rounds": 5, "interleaved": True},
        baseline=base,
        candidate=cand,
    )


def prediction_report(*, partial: bool = False) -> PredictionReport:
    """A predicted training step: parts that add up to the peak (2 MiB + 1 MiB + ...)."""
    scope = "predicted_accelerator_allocated"

    def part(value: int) -> MetricResult:
        if partial:
            return MetricResult.partial(
                value, unit="bytes", scope=scope, method="fake_tensor_prediction"
            )
        return MetricResult.complete(
            value, unit="bytes", scope=scope, method="fake_tensor_prediction"
        )

    categories = {
        "parameters": 2 * 2**20,
        "buffers": 0,
        "gradients": 2 * 2**20,
        "optimizer_state": 4 * 2**20,
        "activations": 1536,
        "temporaries": 2**20,
        "other": 512,
    }
    peak = sum(categories.values())
    return PredictionReport(
        provenance=provenance(stage="predict"),
        name="tinynet training step",
        device="cuda",
        allocator="CUDA caching allocator: 512-byte blocks",
        rounding_bytes=512,
        peak=part(peak),
        by_category={name: part(value) for name, value in categories.items()},
        by_module={
            "optimizer": part(5 * 2**20),
            "TinyNet.fc": part(4 * 2**20),
            EVIL: part(1536),
            "(outside modules)": part(512),
        },
        by_phase={"forward": part(4 * 2**20 + 2048), "optimizer_step": part(peak)},
        phase_at_peak="optimizer_step",
        capacity_bytes=8 * 2**20,
        fits=None if partial else False,
        diagnostics=[
            Diagnostic(
                code="fake_unsupported_operator",
                severity="error",
                metric="peak",
                operator="aten.nonzero.default",
                message="aten.nonzero.default cannot run on fake tensors",
            )
        ]
        if partial
        else [],
    )


def history_report() -> HistoryReport:
    """Four commits: a clean 10 ms, 10 ms, then x1.3 (13 ms, 13 ms); one confident step
    between commits 1 and 2 (the ratio 13 / 10 = 1.3), a subject that must stay text."""
    shas = [f"{i:040x}" for i in range(1, 5)]
    points = [
        HistoryPoint(commit=sha, index=i, status="complete", value=0.010 if i < 2 else 0.013,
                     clean=True)
        for i, sha in enumerate(shas)
    ]  # fmt: skip
    step = HistoryStep(
        metric="latency/warmed_median_s",
        segment=0,
        before=shas[1],
        after=shas[2],
        commits=[shas[2]],
        single_commit=True,
        ratio=1.3,
        ci_low=1.25,
        ci_high=1.35,
        confidence=0.99,
        direction="increased",
        worse=True,
    )
    return HistoryReport(
        provenance=provenance(stage="history"),
        repo="/work/repo",
        rev_range="HEAD",
        commits=[
            HistoryCommit(
                sha=sha, time=1_700_000_000 + 60 * i, subject=EVIL if i == 3 else f"commit {i}"
            )
            for i, sha in enumerate(shas)
        ],
        series=[
            HistorySeries(
                metric="latency/warmed_median_s",
                stage="latency",
                name="warmed_median_s",
                unit="s",
                points=points,
                segments=[HistorySegment(start=0, stop=4)],
                steps=[step],
            )
        ],
        steps=[step],
    )
