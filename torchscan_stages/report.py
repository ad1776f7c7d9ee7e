"""Wire models for every report kind, their invariants, and atomic load/save.

Reports are the product: every number travels inside a :class:`MetricResult` that states
whether it is complete, a lower bound, or missing, and what it covers and how it was
obtained. JSON is the only machine interface; these models are its schema.

Schema-version policy (``SCHEMA_VERSION``, written into every report):

* A new optional field (with a default that states "not recorded", usually ``None``) is
  compatible: no bump. Older reports load with the default; older readers refuse the new
  field (``extra="forbid"``), so write reports with the version you read them with.
  ``FlopReport.product_flops`` was added this way.
* A field whose meaning or unit changes, whose allowed values widen or change, or a field
  removed or renamed, is a breaking change: bump ``SCHEMA_VERSION``; ``load_report`` then
  refuses reports of any other version with one line naming both versions (re-create them
  with this version).
* Refusing values no correct writer ever produced (negative counts, NaN or infinite times)
  is a fix, not a schema change: no bump. Such a report was already wrong.
* A new on-disk encoding of the same fields is a breaking change for older readers: bump.
  Version 2 is the compact form (``report_codec``: defaults left out, analysis layers stored
  column-wise); this version still reads version 1 files (``READABLE_VERSIONS``) and holds
  them in memory as the current version, since the fields did not change.

Every number a report carries is checked on load: counts, bytes, FLOPs and times are finite
and non-negative, so a report ``load_report`` accepts can always be rendered.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import gzip
import json
import math
import os
import tempfile
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeAlias, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails

SCHEMA_VERSION = 2
# versions load_report reads: 1 is the field-by-field form, 2 adds the compact encoding
READABLE_VERSIONS = (1, 2)
GZIP_MAGIC = b"\x1f\x8b"

Status: TypeAlias = Literal["complete", "partial", "unavailable"]
Severity: TypeAlias = Literal["info", "warning", "error"]
ReportKind: TypeAlias = Literal[
    "analysis", "flops", "benchmark", "report_diff", "benchmark_comparison", "prediction"
]
Number: TypeAlias = int | float
# report numbers are never coerced: "3" or True is refused, not quietly turned into 3
StrictNumber: TypeAlias = StrictInt | StrictFloat
# counts, sizes and times: never negative, never NaN or infinite
NonNegInt: TypeAlias = Annotated[int, Field(ge=0)]
NonNegFloat: TypeAlias = Annotated[float, Field(ge=0, allow_inf_nan=False)]
FiniteFloat: TypeAlias = Annotated[float, Field(allow_inf_nan=False)]
# units whose numbers count or measure something, so a negative one is impossible
# ("input_positions" is not among them: a transposed convolution's padding can be negative)
NON_NEGATIVE_UNITS = frozenset({"FLOPs", "MACs", "elements", "bytes", "parameters", "s"})


class _Model(BaseModel):
    """Base for wire models: unknown fields are refused so typos never pass silently."""

    model_config = ConfigDict(extra="forbid")


class MetricResult(_Model):
    """One number with its trust state.

    | status      | value  | known_value |
    | complete    | number | same number |
    | partial     | null   | number (lower bound) |
    | unavailable | null   | null |
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: Status
    value: StrictNumber | None = None
    known_value: StrictNumber | None = None
    unit: str
    scope: str
    method: str

    @model_validator(mode="after")
    def _check_status(self) -> MetricResult:
        for name in ("value", "known_value"):
            number = getattr(self, name)
            if isinstance(number, float) and not math.isfinite(number):
                raise ValueError(f"MetricResult.{name} must be finite, got {number!r}")
            if number is not None and number < 0 and _counts_something(self.unit):
                raise ValueError(
                    f"MetricResult.{name} must be >= 0 for unit {self.unit!r} "
                    f"(a count, size or time), got {number!r}"
                )
        if self.status == "complete":
            if self.value is None or self.known_value is None:
                raise ValueError("a complete MetricResult needs both value and known_value")
            if self.value != self.known_value:
                raise ValueError(
                    "a complete MetricResult has value == known_value, "
                    f"got value={self.value!r} known_value={self.known_value!r}"
                )
        elif self.status == "partial":
            if self.value is not None:
                raise ValueError(
                    "a partial MetricResult has value=None (known_value is a lower bound), "
                    f"got value={self.value!r}"
                )
            if self.known_value is None:
                raise ValueError("a partial MetricResult needs known_value (its lower bound)")
        elif self.value is not None or self.known_value is not None:
            raise ValueError("an unavailable MetricResult has value=None and known_value=None")
        return self

    # The constructors below return shared, validated instances (MetricResult is frozen):
    # a crawl of thousands of layers builds the same few results over and over, and pydantic
    # validation per result would dominate its per-layer cost.

    @classmethod
    def complete(cls, value: Number, *, unit: str, scope: str, method: str) -> MetricResult:
        return _shared_metric("complete", value, type(value).__name__, unit, scope, method)

    @classmethod
    def partial(cls, known_value: Number, *, unit: str, scope: str, method: str) -> MetricResult:
        kind = type(known_value).__name__
        return _shared_metric("partial", known_value, kind, unit, scope, method)

    @classmethod
    def unavailable(cls, *, unit: str, scope: str, method: str) -> MetricResult:
        return _shared_metric("unavailable", None, "NoneType", unit, scope, method)

    @property
    def is_complete(self) -> bool:
        return self.status == "complete"


def _counts_something(unit: str) -> bool:
    """Counts, sizes, times and rates of them (``images/s``) are never negative."""
    return unit in NON_NEGATIVE_UNITS or unit.endswith("/s")


@functools.lru_cache(maxsize=1 << 16)
def _shared_metric(
    status: Status, number: Number | None, number_type: str, unit: str, scope: str, method: str
) -> MetricResult:
    """One validated MetricResult per distinct content (``number_type`` keeps 1 and 1.0 apart)."""
    return MetricResult(
        status=status,
        value=number if status == "complete" else None,
        known_value=number,
        unit=unit,
        scope=scope,
        method=method,
    )


_M = TypeVar("_M", bound=BaseModel)


def trusted_construct(cls: type[_M], values: dict[str, Any]) -> _M:
    """An instance from values that are already typed and complete: every field given.

    What ``model_construct`` does for such values, without its per-field alias and default
    loop, which dominated the per-layer cost of a crawl of thousands of layers. Models with a
    post-init hook, or values that miss or misname a field, go through ``model_construct``
    (a test checks both give equal instances).
    """
    fields = cls.__pydantic_fields__
    if (
        cls.__pydantic_post_init__
        or len(values) != len(fields)
        or not values.keys() >= fields.keys()
    ):
        return cls.model_construct(**values)
    state = {name: values[name] for name in fields}  # field order, and a dict of its own
    model = cls.__new__(cls)
    object.__setattr__(model, "__dict__", state)
    object.__setattr__(model, "__pydantic_fields_set__", set(state))
    object.__setattr__(model, "__pydantic_extra__", None)
    object.__setattr__(model, "__pydantic_private__", None)
    return model


def combine_sum(results: list[MetricResult], *, unit: str, scope: str, method: str) -> MetricResult:
    """Add results of one unit/scope/method; incompleteness propagates, never becomes zero.

    An empty list is a complete zero (nothing to count). Any unavailable or partial part makes
    the sum partial with the known parts as its lower bound; all unavailable stays unavailable.
    """
    for result in results:
        if (result.unit, result.scope, result.method) != (unit, scope, method):
            raise ValueError(
                "refusing to add results of different unit/scope/method: "
                f"expected ({unit}, {scope}, {method}), got "
                f"({result.unit}, {result.scope}, {result.method})"
            )
    if not results:
        return MetricResult.complete(0, unit=unit, scope=scope, method=method)
    known = [r.known_value for r in results if r.known_value is not None]
    total: Number = sum(known) if known else 0
    if all(r.status == "complete" for r in results):
        return MetricResult.complete(total, unit=unit, scope=scope, method=method)
    if not known:
        return MetricResult.unavailable(unit=unit, scope=scope, method=method)
    return MetricResult.partial(total, unit=unit, scope=scope, method=method)


class Diagnostic(_Model):
    """Why a number is incomplete or should be read with care; travels with the measurement."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str
    severity: Severity = "warning"
    metric: str | None = None
    message: str
    path: str | None = None
    operator: str | None = None
    count: int | None = None


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
    (where readable) and how many other processes kept at least half a core busy."""

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


# ----------------------------------------------------------------------------- analysis


class ValueMeta(_Model):
    """Recursive description of a call's inputs or outputs: shapes and types, never values."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tensor", "tuple", "list", "dict", "none", "scalar", "other"]
    type_name: str | None = None
    shape: list[NonNegInt] | None = None
    dtype: str | None = None
    device: str | None = None
    requires_grad: bool | None = None
    items: list[ValueMeta] | None = None
    keys: list[str] | None = None


class ParameterStats(_Model):
    """Parameters and buffers owned directly by one module (not its children)."""

    parameters: NonNegInt
    trainable_parameters: NonNegInt
    parameter_bytes: NonNegInt
    buffer_elements: NonNegInt
    buffer_bytes: NonNegInt
    shared_parameters: NonNegInt = 0


class LayerMetrics(_Model):
    module_flops: MetricResult
    macs: MetricResult
    dmas: MetricResult
    receptive_field: MetricResult
    effective_stride: MetricResult
    effective_padding: MetricResult


class LayerOperatorFlops(_Model):
    """Operator FLOPs (method ``operator_dispatch``) dispatched while one module call was active.

    ``own``: operators the call ran itself, outside its child module calls; ``inclusive``: its
    whole call, children included. ``*_products`` are the tensor-product share of each. Never
    added to the module-formula metrics beside them. Frozen: records with equal counts share
    one instance.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    own: MetricResult
    inclusive: MetricResult
    own_products: MetricResult
    inclusive_products: MetricResult


class LayerRecord(_Model):
    """One module call. A module called twice has two records, told apart by call_index.

    ``operator_flops`` is absent in reports written before it existed and in
    ``mode="structure"`` (an optional field: no schema version change).
    """

    path: str
    call_index: int
    name: str
    depth: int
    type: str
    is_leaf: bool
    handler: str | None = None
    inclusive: bool = False
    input: ValueMeta
    output: ValueMeta | None = None
    params: ParameterStats
    metrics: LayerMetrics
    operator_flops: LayerOperatorFlops | None = None


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


class BenchmarkComparison(_Report):
    kind: Literal["benchmark_comparison"] = "benchmark_comparison"
    baseline_name: str | None = None
    candidate_name: str | None = None
    check: CheckResult
    deltas: list[PerformanceDelta]
    settings: dict[str, Any] = Field(default_factory=dict)
    baseline: BenchmarkReport | None = None
    candidate: BenchmarkReport | None = None


# ---------------------------------------------------------------------------- prediction


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
    preexisting_bytes: MetricResult | None = None
    capacity_bytes: int | None = None
    fits: bool | None = None
    ran_without_data: bool = True
    workload_calls: int = 1


AnyReport: TypeAlias = Annotated[
    AnalysisReport
    | FlopReport
    | BenchmarkReport
    | ReportDiff
    | BenchmarkComparison
    | PredictionReport,
    Field(discriminator="kind"),
]

REPORT_TYPES: dict[str, type[_Report]] = {
    "analysis": AnalysisReport,
    "flops": FlopReport,
    "benchmark": BenchmarkReport,
    "report_diff": ReportDiff,
    "benchmark_comparison": BenchmarkComparison,
    "prediction": PredictionReport,
}


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


# ------------------------------------------------------------------------------ load/save


def _decode(data: bytes, where: str) -> str:
    """Text of a report file's bytes; gzip data (magic ``1f 8b``) is decompressed first,
    whatever the file is called."""
    if data.startswith(GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:  # BadGzipFile is an OSError
            raise ValueError(
                f"{where}: not a torchscan_stages report (damaged gzip data: {error})"
            ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{where}: not a torchscan_stages report (not UTF-8 text: byte {error.start} "
            f"is {data[error.start : error.start + 1]!r})"
        ) from None


def _read_file(path: Path, where: str) -> str:
    try:
        if path.is_dir():
            raise ValueError(f"load_report: {where!r} is a directory, not a report file")
        if not path.is_file():
            raise ValueError(f"load_report: no report file at {where!r}")
        data = path.read_bytes()
    except OSError as error:  # unreadable, or a name too long for the file system
        raise ValueError(f"load_report: cannot read {where[:200]!r}: {error.strerror}") from None
    return _decode(data, where)


def _read_source(path_or_text: str | os.PathLike[str] | bytes) -> tuple[str, str]:
    """Return (text, where) for a path or a JSON text."""
    if isinstance(path_or_text, bytes):
        return _decode(path_or_text, "<bytes>"), "<bytes>"
    if isinstance(path_or_text, os.PathLike):
        path = Path(path_or_text)
        return _read_file(path, str(path)), str(path)
    if not isinstance(path_or_text, str):
        raise TypeError(
            f"load_report takes a path, JSON text or bytes, got {type(path_or_text).__name__}"
        )
    text = path_or_text
    if text.lstrip().startswith(("{", "[")):
        return text, "<text>"
    if "\x00" in text:
        raise ValueError("load_report: the argument is neither a JSON document nor a file path")
    try:
        exists = Path(text).exists()
    except OSError:  # e.g. a name too long to be a path: it is not a file either
        exists = False
    if not exists:
        shown = text if len(text) <= 200 else text[:200] + "..."
        raise ValueError(f"load_report: {shown!r} is neither a JSON document nor an existing file")
    return _read_file(Path(text), text), text


def _parse(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: malformed JSON ({error})") from None
    except RecursionError:
        raise ValueError(f"{where}: JSON nested too deeply to be a report") from None


def _first_error(error: ValidationError) -> str:
    """The first validation error as ``field.path: message`` (and how many more there are)."""
    errors: list[ErrorDetails] = error.errors(include_url=False)
    first = errors[0]
    location = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{location}: {first['msg']}{more}"


def load_report(
    path_or_text: str | os.PathLike[str] | bytes,
) -> (
    AnalysisReport
    | FlopReport
    | BenchmarkReport
    | ReportDiff
    | BenchmarkComparison
    | PredictionReport
):
    """Load any report kind from a path or JSON text; refuse anything it cannot vouch for.

    Every refusal is one ``ValueError`` naming the file (or ``<text>``) and what is wrong:
    a directory, unreadable or non-UTF-8 file, malformed or too deeply nested JSON, an
    unknown kind, another schema version, or the path of the first invalid field.
    """
    text, where = _read_source(path_or_text)
    document = _parse(text, where)
    if not isinstance(document, dict):
        raise ValueError(f"{where}: not a torchscan_stages report (top level is not an object)")
    if "kind" not in document or "schema_version" not in document:
        raise ValueError(
            f"{where}: not a torchscan_stages report (no 'kind' and 'schema_version' fields)"
        )
    kind = document["kind"]
    if not isinstance(kind, str) or kind not in REPORT_TYPES:
        raise ValueError(
            f"{where}: unknown report kind {kind!r}; expected one of {sorted(REPORT_TYPES)}"
        )
    version = document["schema_version"]
    if type(version) is not int or version not in READABLE_VERSIONS:
        readable = " or ".join(str(v) for v in READABLE_VERSIONS)
        raise ValueError(
            f"{where}: unsupported schema_version {version!r} for kind {kind!r}; "
            f"this version of torchscan_stages reads schema_version {readable} "
            "(re-create the report with this version)"
        )
    document["schema_version"] = SCHEMA_VERSION  # same fields: held as the current version
    try:
        return _validate(kind, version, document)  # type: ignore[return-value]
    except ValidationError as error:
        raise ValueError(f"{where}: invalid {kind} report at {_first_error(error)}") from None
    except ValueError as error:  # report_codec.LayoutError: columns that do not fit together
        raise ValueError(f"{where}: invalid {kind} report at {error}") from None
    except RecursionError:
        raise ValueError(f"{where}: invalid {kind} report: nested too deeply") from None


def _validate(kind: str, version: int, document: dict[str, Any]) -> _Report:
    """The report of a document: compact analysis layers decoded fast, the rest by pydantic."""
    from .report_codec import load_compact_analysis, share_metric_maps

    share_metric_maps(kind, document)
    if version >= 2 and kind == "analysis" and isinstance(document.get("layers"), dict):
        return load_compact_analysis(document)
    return REPORT_TYPES[kind].model_validate(document)


def report_json_schema(kind: str) -> dict[str, Any]:
    """JSON Schema of one report kind."""
    if kind not in REPORT_TYPES:
        raise ValueError(f"unknown report kind {kind!r}; expected one of {sorted(REPORT_TYPES)}")
    return REPORT_TYPES[kind].model_json_schema()


def _umask() -> int:
    """The process umask: from /proc on Linux (no global change), else by setting it back."""
    with (
        contextlib.suppress(OSError, ValueError),
        open("/proc/self/status", encoding="ascii") as handle,
    ):
        for line in handle:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_TMP_RANDOM_CHARS = 8  # tempfile's random part of a name
# a report write takes milliseconds; a temporary this much older than a new write of the same
# file belongs to a write that was killed, not to one still running
STALE_TMP_AGE_S = 60.0


def _clean_stale_temporaries(target: Path, started: float, own: str) -> None:
    """Remove ``.NAME.XXXX.tmp`` files of ``target`` that a killed write left behind.

    Only exact matches of this target's pattern (``mkstemp``'s 8 random characters) last
    modified ``STALE_TMP_AGE_S`` before this write began: a concurrent write is newer.
    """
    prefix, suffix = f".{target.name}.", ".tmp"
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return
    for entry in entries:
        name = entry.name
        middle = name[len(prefix) : -len(suffix)]
        if (
            name == own
            or not (name.startswith(prefix) and name.endswith(suffix))
            or len(middle) != _TMP_RANDOM_CHARS
            or not middle.replace("_", "a").isalnum()
        ):
            continue
        with contextlib.suppress(OSError):
            stale = entry.stat(follow_symlinks=False).st_mtime < started - STALE_TMP_AGE_S
            if stale and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)


def atomic_write_text(path: str | os.PathLike[str], text: str | bytes) -> Path:
    """Write text (or bytes) to ``path`` via a temporary file beside it and an atomic rename.

    An interrupted write leaves the previous file (or none), never a truncated one; the
    temporary files of earlier writes killed before their rename are removed here. The file
    gets the permissions of any new file under the process umask (0644 under umask 022).
    """
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file to write", str(target))
    if target.parent.exists() and not target.parent.is_dir():  # mkdir would say "File exists"
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory", str(target.parent))
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    tmp_name = _write_temporary(target, text)
    try:
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    _clean_stale_temporaries(target, started, os.path.basename(tmp_name))
    return target


def _write_temporary(target: Path, text: str | bytes) -> str:
    """Write ``text`` (UTF-8 when a str) to a new ``.NAME.XXXXXXXX.tmp`` beside ``target``,
    synced; its path.

    The caller renames it over ``target``. On any failure the temporary is removed. Also
    the first phase of the pipeline runner's all-or-nothing write of a stage's outputs.
    """
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp creates 0600; honour the umask instead
        data = text.encode("utf-8") if isinstance(text, str) else text
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    return tmp_name


def _same_file(source: object, target: Path) -> bool:
    """Whether ``source`` (a report model, JSON text or a path) names the file ``target``."""
    if isinstance(source, bytes) or not isinstance(source, (str, os.PathLike)):
        return False
    if isinstance(source, str) and source.lstrip().startswith(("{", "[")):
        return False  # JSON text, not a path
    try:
        return Path(source).exists() and os.path.samefile(source, target)
    except (OSError, ValueError):
        return False


def check_output_path(
    output: str | os.PathLike[str] | None, sources: Sequence[object], *, example: str = "out"
) -> None:
    """Refuse an output that is a directory or one of the inputs, before any work is done.

    For every command and function that reads reports and writes a file: writing over an
    input would destroy the report the output was made from. ``sources`` may mix paths,
    JSON text and report models (only paths can clash).
    """
    if output is None:
        return
    target = Path(output)
    if target.is_dir():
        raise ValueError(
            f"output {str(target)!r} is a directory; name the file to write, "
            f"such as {str(target / example)!r}"
        )
    if not target.exists():
        return
    for source in sources:
        if _same_file(source, target):
            raise ValueError(
                f"output {str(target)!r} is one of the input reports; refusing to overwrite it "
                "(choose another output file)"
            )


def report_text(report: _Report) -> str:
    """The compact JSON text of a report (``report_codec``), as :func:`save_report` writes it."""
    from .report_codec import dump_text, encode_report

    return dump_text(encode_report(report, SCHEMA_VERSION))


def save_report(report: _Report, path: str | os.PathLike[str]) -> Path:
    """Write any report atomically in its compact JSON form.

    A name ending in ``.gz`` (``crawl.json.gz``) gets the same text gzip-compressed; any other
    name gets plain JSON text, so ``jq``, diffs and DVC read it as before. ``load_report``
    tells the two apart by content (gzip magic ``1f 8b``), not by name.
    """
    text = report_text(report)
    if str(path).endswith(".gz"):
        # mtime=0: the same report gives the same bytes (DVC and git see no change)
        return atomic_write_text(path, gzip.compress(text.encode("utf-8"), mtime=0))
    return atomic_write_text(path, text)
