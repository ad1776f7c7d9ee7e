"""run_passes: the selected passes over one workload, one BenchmarkReport.

Passes run one after another and never overlap: clean timing runs first (so its first call
is the workload's first call in this function) and without any hook, dispatch mode or
profiler; then tracked memory, operator FLOPs, the profiler, and the fresh-process RSS
command. Each pass's number of workload calls is recorded in ``execution.calls``. The
callable's side effects (optimizer steps, counters) happen for every call and are not
undone. Measurement code returns reports and never renders: the public
``measure_workload`` (torchscan_stages.face) passes the FLOP counter in and prints the summary;
this module writes only the progress lines.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import torch

from ..devices import check_workload, execution_record, resolve_device
from ..provenance import build_provenance
from ..report import STATUS_MARKERS as MARKERS
from ..report import BenchmarkReport, Diagnostic, FlopReport, HostState
from ..workloads import Workload
from .latency import run_latency
from .latency_options import MEASURE_DEFAULTS, LatencyOptions, validate_work
from .memory import run_peak_memory
from .profile import DEFAULT_ROW_LIMIT, run_profile, validate_profile_options
from .rss import DEFAULT_TIMEOUT_S, measure_peak_rss, validate_rss_options

# the FLOP pass: workload -> (its FlopReport, the grad mode its operators ran under)
FlopCounter = Callable[[Workload], tuple[FlopReport, "bool | None"]]


def _progress_stream(progress: bool | TextIO | None) -> TextIO | None:
    if progress is True:
        return sys.stderr
    if progress is False or progress is None:
        return None
    if not hasattr(progress, "write"):
        raise TypeError(f"progress must be True, False or a writable text file, got {progress!r}")
    return progress


def _validate(
    workload: object,
    flags: Mapping[str, object],
    name: object,
    precision: object,
    training: object,
) -> None:
    check_workload(workload)
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise TypeError(f"{key} must be True or False, got {value!r}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, got {type(name).__name__}")
    if precision is not None and not isinstance(precision, str):
        raise TypeError(f"precision must be a str (e.g. 'float32') or None, got {precision!r}")
    if training is not None and not isinstance(training, bool):
        raise TypeError(f"training must be True, False or None, got {training!r}")


@dataclass
class _Passes:
    """What the passes produced so far: report sections, calls, diagnostics, host state."""

    workload: Workload
    device: torch.device
    parts: dict[str, Any] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    observed_grad: bool | None = None
    host: HostState | None = None

    def latency(self, options: LatencyOptions, work_units: float, unit: str, note: Any) -> str:
        run = run_latency(
            self.workload,
            options,
            work_units=work_units,
            unit=unit,
            device=self.device,
            progress=note,
        )
        self.parts["latency"] = run.section
        self.diagnostics += run.diagnostics
        self.calls["latency"] = run.calls
        self.host = run.host
        return MARKERS[run.section.warmed.status]

    def memory(self) -> str:
        mem = run_peak_memory(self.workload, self.device)
        self._grad(mem.grad_enabled)
        self.parts["memory"] = mem.section
        self.diagnostics += mem.diagnostics
        self.calls["memory"] = mem.calls
        return " ".join(MARKERS[r.status] for r in mem.section.results)

    def flops(self, count: FlopCounter) -> str:
        flop_report, grad = count(self.workload)
        # its diagnostics (uncounted operators) join the report's own list, so status and
        # diagnostics stay together wherever the report is read
        self.diagnostics += flop_report.diagnostics
        self._grad(grad)
        self.parts["flops"] = flop_report
        self.calls["flops"] = flop_report.workload_calls
        return MARKERS[flop_report.total.status]

    def profile(self, row_limit: int, trace_path: str | None) -> str:
        prof = run_profile(self.workload, self.device, row_limit=row_limit, trace_path=trace_path)
        self.parts["profile"] = prof.section
        self.diagnostics += prof.diagnostics
        self.calls["profile"] = prof.calls
        return "[instrumented]"

    def rss(self, argv: list[str], timeout: float) -> str:
        rss_report = measure_peak_rss(argv, timeout=timeout)
        self.parts["rss"] = rss_report.rss
        self.diagnostics += rss_report.diagnostics
        return MARKERS[rss_report.rss.peak.status] if rss_report.rss else "[n/a]"

    def _grad(self, grad: bool | None) -> None:
        if self.observed_grad is None:
            self.observed_grad = grad


def _notifier(stream: TextIO | None) -> Callable[[str], None]:
    def note(message: str) -> None:
        if stream is not None:
            stream.write(f"[measure_workload] {message}\n")
            stream.flush()

    return note


@dataclass(frozen=True)
class PassPlan:
    """What one ``run_passes`` call runs and records: the passes, the work one call completes,
    where, the declarations recorded as given, and each pass's settings (timing in one
    :class:`LatencyOptions` or a mapping of its fields, as every timing function takes it).

    ``precision`` and ``training`` are declarations recorded as given (the workload owns
    them). ``rss_command`` runs as a fresh child (see measure_peak_rss) and must rebuild the
    workload by itself. Values are checked by ``run_passes`` before any pass runs.
    """

    flops: bool = True
    memory: bool = True
    latency: bool = True
    profile: bool = False
    rss_command: Sequence[str] | None = None
    work_units: float = 1
    unit: str = "samples"
    device: str | torch.device | None = None
    name: str | None = None
    precision: str | None = None
    training: bool | None = None
    options: LatencyOptions | Mapping[str, Any] | None = None
    rss_timeout: float = DEFAULT_TIMEOUT_S
    profile_row_limit: int = DEFAULT_ROW_LIMIT
    profile_trace_path: str | None = None


def run_passes(
    workload: Workload,
    plan: PassPlan,
    *,
    count_flops: FlopCounter | None = None,
    progress: bool | TextIO = True,
) -> BenchmarkReport:
    """Run the passes ``plan`` selects, one after another, and return one BenchmarkReport
    (measure_workload's passes; it prints the summary).

    ``count_flops`` runs the FLOP pass (analysis' operator counter, passed in by the face so
    measurement never imports analysis); ``plan.flops`` needs it. ``progress`` (True =
    stderr, False = silent, or a text file) reports each pass as it starts and ends.
    """
    flags = {"flops": plan.flops, "memory": plan.memory, "latency": plan.latency}
    flags["profile"] = plan.profile
    _validate(workload, flags, plan.name, plan.precision, plan.training)
    if plan.flops and count_flops is None:
        raise ValueError("run_passes with flops=True needs count_flops (the operator counter)")
    validate_work(plan.work_units, plan.unit)
    options = LatencyOptions.from_mapping(plan.options, base=MEASURE_DEFAULTS)
    row_limit, trace_path = plan.profile_row_limit, plan.profile_trace_path
    validate_profile_options(row_limit, "self_cpu_time_total", trace_path, 1)
    rss_argv: list[str] | None = None
    if plan.rss_command is not None:
        rss_argv = validate_rss_options(plan.rss_command, plan.rss_timeout, None, None, 0.02)[0]
    note = _notifier(_progress_stream(progress))
    done = _Passes(workload, resolve_device(plan.device))
    steps: list[tuple[str, Callable[[], str]]] = [
        ("latency", lambda: done.latency(options, plan.work_units, plan.unit, note)),
        ("memory", done.memory),
        ("flops", lambda: done.flops(count_flops) if count_flops is not None else ""),
        ("profile", lambda: done.profile(row_limit, trace_path)),
        ("rss", lambda: done.rss(rss_argv or [], plan.rss_timeout)),
    ]
    chosen = {**flags, "rss": rss_argv is not None}
    selected = [(pass_name, step) for pass_name, step in steps if chosen[pass_name]]
    for index, (pass_name, step) in enumerate(selected, start=1):
        note(f"({index}/{len(selected)}) {pass_name} ...")
        started = time.perf_counter()
        status = step()
        took = time.perf_counter() - started
        note(f"({index}/{len(selected)}) {pass_name} {status} in {took:.2f} s")
    return BenchmarkReport(
        provenance=build_provenance(host=done.host),
        name=plan.name,
        work_units=plan.work_units,
        unit=plan.unit,
        execution=execution_record(
            done.device,
            done.calls,
            precision=plan.precision,
            training=plan.training,
            workload_grad_enabled=done.observed_grad,
        ),
        diagnostics=done.diagnostics,
        **done.parts,
    )


__all__ = ["FlopCounter", "PassPlan", "run_passes"]
