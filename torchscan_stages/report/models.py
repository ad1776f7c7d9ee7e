"""The report kinds (analysis, flops, benchmark, diffs, comparison, prediction) and their parts.

See the package docstring for the schema-version policy.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, StrictInt, model_validator

from .brief import report_text
from .consistency import check_analysis, check_delta
from .io import save_report
from .metric import (
    SCHEMA_VERSION,
    Diagnostic,
    FiniteFloat,
    MetricResult,
    NonNegFloat,
    NonNegInt,
    Number,
    Status,
    _Model,
)
from .records import LayerRecord, ValueMeta


class EnvironmentInfo(_Model):
    """Hardware and software that a number depends on. Free of timestamps and host names."""

    python_version: str
    python_implementation: str
    platform: str
    machine: str
    cpu_model: str
    cpu_count_logical: int | None
    cpu_count_physical: int | None
    torch_version: str | None
    package_version: str
    accelerators: list[str] = Field(default_factory=list)
    packages: dict[str, str] = Field(default_factory=dict)


class RuntimeState(_Model):
    """Process settings at measurement time that change results (threads, grad mode, ...)."""

    num_threads: int
    num_interop_threads: int
    grad_enabled: bool
    deterministic_algorithms: bool
    default_dtype: str


class RunContext(_Model):
    """What the pipeline knows about a run: config, revisions, seed, source state."""

    config: dict[str, Any] = Field(default_factory=dict)
    model_name: str | None = None
    model_revision: str | None = None
    input_name: str | None = None
    input_revision: str | None = None
    seed: int | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    stage: str | None = None


class HostPressure(_Model):
    """CPU pressure as the kernel accounts it during a timing (every field optional: None
    where the kernel does not expose it). ``psi_*_share``: stalled time per wall second over
    the timing (from /proc/pressure/cpu totals); ``psi_*_avg10/avg60``: the kernel's own
    averages at the end, in percent; ``steal_share``: hypervisor steal in all CPU time;
    ``procs_running``: runnable tasks system-wide (most of start and end, this one included);
    ``usable_cpus``: the least of affinity, cgroup quota and logical CPUs; ``other_cpu_cores``:
    cores used by the other visible processes; ``niced_busy_processes``: busy ones with
    nice > 0; ``busy_percent_threshold``: the CPU percent that made a process busy."""

    usable_cpus: float | None = None
    affinity_cpus: int | None = None
    cgroup_quota_cpus: float | None = None
    psi_some_share: float | None = None
    psi_full_share: float | None = None
    psi_some_avg10: float | None = None
    psi_some_avg60: float | None = None
    psi_full_avg10: float | None = None
    psi_full_avg60: float | None = None
    steal_share: float | None = None
    procs_running: int | None = None
    other_cpu_cores: float | None = None
    niced_busy_processes: int | None = None
    busy_percent_threshold: float | None = None


class HostState(_Model):
    """The host around a timing: its load at start and end, the CPU frequency governor
    (where readable), how many other processes competed (busy: at least half a fair share
    of the usable cores) and what the kernel accounted (``pressure``)."""

    logical_cpus: int | None = None
    load_average_start: list[float] | None = None
    load_average_end: list[float] | None = None
    cpu_governor: str | None = None
    busy_processes: int | None = None
    loaded: bool = False
    # when and where the timing ran (UTC, ISO 8601; host_id = 12 hex of sha256(hostname)),
    # so that a sweep can tell timing jobs that overlapped on one host
    host_id: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    pressure: HostPressure | None = None  # absent in reports written before it existed


class Provenance(_Model):
    """Where a report came from. ``env_hash`` keys caches and comparisons."""

    package_version: str
    torch_version: str | None
    env_hash: str
    environment: EnvironmentInfo
    runtime: RuntimeState | None = None
    run: RunContext | None = None
    host: HostState | None = None  # timing reports only


class _Report(_Model):
    schema_version: int = SCHEMA_VERSION
    provenance: Provenance
    diagnostics: list[Diagnostic] = Field(default_factory=list)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write this report atomically in its compact JSON form (see :func:`save_report`)."""
        return save_report(self, path)

    def __str__(self) -> str:
        """A few lines for a person (``print(report)``); ``repr`` keeps every field."""
        return report_text(self)


# the public name of the base of every report kind (for type hints outside the package)
BaseReport: TypeAlias = _Report


class AnalysisTotals(_Model):
    parameters: MetricResult
    trainable_parameters: MetricResult
    frozen_parameters: MetricResult
    parameter_bytes: MetricResult
    buffer_elements: MetricResult
    buffer_bytes: MetricResult
    module_flops: MetricResult
    macs: MetricResult
    dmas: MetricResult
    operator_flops: MetricResult


class OperatorCount(_Model):
    calls: NonNegInt
    flops: MetricResult


class IgnoredOperator(_Model):
    operator: str
    calls: NonNegInt
    reason: str


class FlopReport(_Report):
    """Operator FLOPs of one workload call, counted over torch's dispatch."""

    kind: Literal["flops"] = "flops"
    name: str | None = None
    total: MetricResult
    # the tensor-product share of total (FlopCounterMode's / fvcore's convention): a new
    # optional field, so no schema-version bump (see the policy above); None when not recorded
    product_flops: MetricResult | None = None
    by_operator: dict[str, OperatorCount] = Field(default_factory=dict)
    by_module: dict[str, MetricResult] = Field(default_factory=dict)
    ignored_operators: list[IgnoredOperator] = Field(default_factory=list)
    workload_calls: NonNegInt = 1
    conventions: dict[str, str] = Field(default_factory=dict)


class AnalysisReport(_Report):
    """Module-level cost of one forward call (crawl_module / summary)."""

    kind: Literal["analysis"] = "analysis"
    model_type: str
    mode: Literal["full", "structure"]
    inputs: ValueMeta
    layers: list[LayerRecord]
    totals: AnalysisTotals
    operator_flops: FlopReport | None = None
    conventions: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> AnalysisReport:
        check_analysis(self.layers, self.totals)
        return self

    def subtree_parameters(self) -> dict[str, int]:
        """Parameters held by each module path with its submodules, each tensor once.

        Built from the records' own counts (first call of each path, tied tensors already
        discounted as ``shared_parameters``); tables show it for containers. Every ancestor
        path of a record has an entry too, also a container that was never called itself
        (GPT-2's ``transformer.h`` ModuleList), so tables need not sum its children again.
        """
        own: dict[str, int] = {}
        for layer in self.layers:
            if layer.path not in own:
                own[layer.path] = layer.params.parameters - layer.params.shared_parameters
        totals: dict[str, int] = {}
        for path, count in own.items():
            totals[path] = totals.get(path, 0) + count
            while path:
                path = path.rpartition(".")[0]
                totals[path] = totals.get(path, 0) + count
        return totals


# ---------------------------------------------------------------------------- benchmark


class ExecutionRecord(_Model):
    """How the workload ran; what anyone needs to reproduce the measurement."""

    device: str
    precision: str | None = None
    num_threads: int
    num_interop_threads: int
    grad_enabled: bool
    training: bool | None = None
    calls: dict[str, NonNegInt] = Field(default_factory=dict)
    # grad mode the workload's own operators ran under (observed in the memory or FLOPs pass):
    # a workload owns its grad mode, so the caller's ``grad_enabled`` may differ
    workload_grad_enabled: bool | None = None
    # what the pipeline configured for this side (None: not configured, as outside the
    # pipeline): the intra-op threads it set for the measured run (the rss stage's in its
    # measured child) and the name of the input the workload was called with
    threads: Annotated[StrictInt, Field(ge=1)] | None = None
    input_name: str | None = None


class LatencyStats(_Model):
    """Statistics over warmed per-call block averages, in seconds."""

    median: NonNegFloat
    q1: NonNegFloat
    q3: NonNegFloat
    iqr: NonNegFloat
    min: NonNegFloat
    max: NonNegFloat
    mean: NonNegFloat
    blocks: NonNegInt
    calls_per_block: NonNegInt
    warmup_calls: NonNegInt
    total_time_s: NonNegFloat
    relative_iqr: NonNegFloat | None = None
    calibration_calls: NonNegInt = 0
    stop_reason: str | None = None


class BlockOutlier(_Model):
    """One warmed block set apart by :func:`measure.host.classify_blocks` (still kept)."""

    index: int
    kind: Literal["descheduled", "slow", "fast"]
    seconds: float


class LatencyNoise(_Model):
    """How the host disturbed the timed blocks, beside the raw blocks (nothing is deleted)."""

    outliers: list[BlockOutlier] = Field(default_factory=list)
    involuntary_switches: int | None = None
    cpu_fraction: float | None = None  # process CPU time / wall time over the blocks
    load_changed: bool | None = None
    # per block (same index as block_times_s): CPU time / wall time and involuntary switches
    block_cpu_fraction: list[float] | None = None
    block_involuntary_switches: list[int] | None = None


class LatencySection(_Model):
    first_call: MetricResult
    warmed: MetricResult
    throughput: MetricResult
    stats: LatencyStats | None = None
    block_times_s: list[NonNegFloat] = Field(default_factory=list)
    timer: str
    synchronized: bool
    settings: dict[str, Any] = Field(default_factory=dict)
    noise: LatencyNoise | None = None


class MemorySection(_Model):
    """Peak memory by scope. Results with different scopes are never summed."""

    results: list[MetricResult]
    baseline_bytes: dict[str, NonNegInt] = Field(default_factory=dict)


class RssPhase(_Model):
    name: str
    peak_rss: MetricResult


class RssSection(_Model):
    peak: MetricResult
    command: list[str]
    exit_code: int | None
    wall_time_s: NonNegFloat
    timed_out: bool
    timeout_s: NonNegFloat
    phases: list[RssPhase] = Field(default_factory=list)
    method_detail: str | None = None
    tree_peak: MetricResult | None = None
    samples: NonNegInt = 0
    sample_interval_s: NonNegFloat | None = None
    signal: int | None = None


class ProfiledOperator(_Model):
    name: str
    calls: NonNegInt
    self_cpu_time_s: NonNegFloat
    cpu_time_total_s: NonNegFloat
    self_device_time_s: NonNegFloat | None = None
    device_time_total_s: NonNegFloat | None = None
    input_shapes: list[str] = Field(default_factory=list)


class ProfileSection(_Model):
    instrumented: Literal[True] = True
    sort_by: str
    operators: list[ProfiledOperator]
    trace_path: str | None = None
    activities: list[str] = Field(default_factory=list)
    profiled_calls: NonNegInt = 1
    warmup_calls: NonNegInt = 0
    row_limit: NonNegInt | None = None
    operators_total: NonNegInt | None = None
    note: str = "instrumented pass: self times include profiler overhead and are not clean latency"


class BenchmarkReport(_Report):
    """Workload evidence: any of latency, memory, rss, profile and operator FLOPs."""

    kind: Literal["benchmark"] = "benchmark"
    name: str | None = None
    work_units: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1
    unit: str = "calls"
    execution: ExecutionRecord
    latency: LatencySection | None = None
    memory: MemorySection | None = None
    rss: RssSection | None = None
    profile: ProfileSection | None = None
    flops: FlopReport | None = None


# --------------------------------------------------------------------------- comparison


class MetricDelta(_Model):
    """Before/after of one metric. ``delta`` is numeric only when both sides are complete."""

    before: MetricResult
    after: MetricResult
    delta: Number | None
    ratio: FiniteFloat | None
    status: Status


class LayerKey(_Model):
    path: str
    call_index: int
    type: str


class LayerChange(_Model):
    path: str
    call_index: int
    type_before: str
    type_after: str
    metrics: dict[str, MetricDelta]


class ReportDiff(_Report):
    kind: Literal["report_diff"] = "report_diff"
    before_model: str
    after_model: str
    totals: dict[str, MetricDelta]
    added: list[LayerKey] = Field(default_factory=list)
    removed: list[LayerKey] = Field(default_factory=list)
    changed: list[LayerChange] = Field(default_factory=list)
    before_env_hash: str | None = None
    after_env_hash: str | None = None


class CheckResult(_Model):
    """The owner's output check. ``performed=False`` when saved reports were compared."""

    performed: bool
    passed: bool | None
    detail: str | None = None
    tolerance: Any = None
    error: str | None = None


Verdict: TypeAlias = Literal[
    "faster",
    "slower",
    "no_difference",
    "increased",
    "decreased",
    "inconclusive",
    "withheld",
    "not_comparable",
]


class PerformanceDelta(_Model):
    metric: str
    unit: str
    scope: str
    method: str
    baseline: MetricResult
    candidate: MetricResult
    ratio: FiniteFloat | None
    ci_low: FiniteFloat | None = None
    ci_high: FiniteFloat | None = None
    confidence: FiniteFloat | None = None
    verdict: Verdict
    withheld: bool = False
    reason: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> PerformanceDelta:
        check_delta(self)
        return self


class CompileRecord(_Model):
    """A ``torch.compile`` candidate's first call, apart from its warmed latency.

    The first call compiles (Dynamo traces, the backend generates code) and runs once:
    ``first_call`` (scope ``compile_first_call``) is that time, the compile cost a user pays
    once per process. ``frames_compiled_first_call`` is Dynamo's compiled-frame count over
    that call; ``frames_compiled_after`` over every later call (timed rounds and the
    instrumented memory pass): 0 when the warmed figures are the compiled code's steady state.
    """

    backend: str
    mode: str | None = None
    first_call: MetricResult
    frames_compiled_first_call: NonNegInt
    frames_compiled_after: NonNegInt


class BenchmarkComparison(_Report):
    kind: Literal["benchmark_comparison"] = "benchmark_comparison"
    baseline_name: str | None = None
    candidate_name: str | None = None
    check: CheckResult
    deltas: list[PerformanceDelta]
    settings: dict[str, Any] = Field(default_factory=dict)
    baseline: BenchmarkReport | None = None
    candidate: BenchmarkReport | None = None
    # an interleaved run's raw rounds beyond the sides' blocks (the A/A control's blocks and
    # every block's probe readings), so a saved verdict can be recomputed exactly
    interleaved_rounds: dict[str, Any] | None = None
    compile: CompileRecord | None = None  # a torch.compile candidate's first call


# ---------------------------------------------------------------------------- prediction


class BatchPoint(_Model):
    """One batch of a prediction's peak-vs-batch curve: its predicted peak and fit."""

    batch: int = Field(ge=1)
    peak: MetricResult
    fits: bool | None = None


class PredictionReport(_Report):
    """Predicted peak memory of one workload run on fake tensors (no data, no device).

    Every number has method ``fake_tensor_prediction`` and a ``predicted_*`` scope, so it is
    never mixed with a measured scope. ``by_category`` parts add up to ``peak``; ``by_module``
    splits the same live bytes at the peak by the module that owns or created them.
    """

    kind: Literal["prediction"] = "prediction"
    name: str | None = None
    device: str
    allocator: str
    rounding_bytes: int
    peak: MetricResult
    by_category: dict[str, MetricResult] = Field(default_factory=dict)
    by_module: dict[str, MetricResult] = Field(default_factory=dict)
    by_phase: dict[str, MetricResult] = Field(default_factory=dict)
    phase_at_peak: str | None = None
    module_at_peak: str | None = None
    preexisting_bytes: MetricResult | None = None  # == resident_bytes (older name)
    # tensors that existed before the step (built outside it), counted once, beside ``peak``
    resident_bytes: MetricResult | None = None
    resident_by_category: dict[str, MetricResult] = Field(default_factory=dict)
    # training steps: a fresh optimizer's first step and a step whose state already exists
    first_step_peak: MetricResult | None = None
    steady_state_peak: MetricResult | None = None
    headline: Literal["peak", "steady_state_peak"] = "peak"
    assumptions: list[str] = Field(default_factory=list)
    # saved tensors save_on_cpu moved to host memory (a CUDA prediction), beside the peak
    host_bytes: MetricResult | None = None
    capacity_bytes: int | None = None
    fits: bool | None = None
    ran_without_data: bool = True
    workload_calls: int = 1
    # per-rank predictions (predict/sharded.py): the fake world and the rank predicted;
    # None: one device holding the whole model
    world_size: int | None = Field(default=None, ge=1)
    rank: int | None = Field(default=None, ge=0)
    sharding: str | None = None  # "fsdp2"; None: not sharded
    batch_curve: list[BatchPoint] = Field(default_factory=list)  # predicted peak per batch


class IncompleteAnalysisError(RuntimeError):
    """Raised under ``strict=True`` when a requested metric is not complete.

    The whole report stays available as ``error.report``.
    """

    def __init__(self, report: _Report, incomplete: list[str]) -> None:
        self.report = report
        self.incomplete = list(incomplete)
        listed = ", ".join(self.incomplete) if self.incomplete else "(none listed)"
        super().__init__(
            f"{type(report).__name__} is incomplete: {listed}; see error.report.diagnostics for why"
        )
