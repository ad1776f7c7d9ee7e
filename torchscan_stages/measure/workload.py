"""measure_workload: selected passes over one workload, one BenchmarkReport, a readable summary.

Passes run one after another and never overlap: clean timing runs first (so its first call
is the workload's first call in this function) and without any hook, dispatch mode or
profiler; then tracked memory, operator FLOPs, the profiler, and the fresh-process RSS
command. Each pass's number of workload calls is recorded in ``execution.calls``. The
callable's side effects (optimizer steps, counters) happen for every call and are not
undone. Measurement code returns reports; only this module's summary and progress print.
"""

from __future__ import annotations

import inspect
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import torch

from ..devices import check_workload, execution_record, resolve_device
from ..provenance import build_provenance
from ..report import BenchmarkReport, Diagnostic, FlopReport, MetricResult
from ..workload_type import Workload
from .latency import run_latency, validate_latency_options
from .memory import run_peak_memory
from .profile import DEFAULT_ROW_LIMIT, run_profile, validate_profile_options
from .rss import DEFAULT_TIMEOUT_S, measure_peak_rss, validate_rss_options

_LATENCY_OPTIONS = frozenset(
    {
        "warmup",
        "min_run_time",
        "max_run_time",
        "min_block_time",
        "min_blocks",
        "target_relative_iqr",
        "noise_threshold",
        "clock",
    }
)
MARKERS = {"complete": "[ok]", "partial": "[>= partial]", "unavailable": "[n/a]"}


def _progress_stream(progress: bool | TextIO | None) -> TextIO | None:
    if progress is True:
        return sys.stderr
    if progress is False or progress is None:
        return None
    if not hasattr(progress, "write"):
        raise TypeError(f"progress must be True, False or a writable text file, got {progress!r}")
    return progress


def _number(value: float, unit: str) -> str:
    """Human-readable number with a binary (bytes) or decimal prefix."""
    if unit == "bytes":
        scaled = float(value)
        for prefix in ("B", "KiB", "MiB", "GiB", "TiB"):
            if abs(scaled) < 1024 or prefix == "TiB":
                return f"{scaled:.1f} {prefix}" if prefix != "B" else f"{int(scaled)} B"
            scaled /= 1024
    if unit == "s":
        for factor, suffix in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
            if abs(value) >= factor or suffix == "us":
                return f"{value / factor:.3f} {suffix}"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3f} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def _line(label: str, result: MetricResult, extra: str = "") -> str:
    marker = MARKERS[result.status]
    if result.status == "complete" and result.value is not None:
        shown = _number(result.value, result.unit)
    elif result.status == "partial" and result.known_value is not None:
        shown = ">= " + _number(result.known_value, result.unit) + " (lower bound)"
    else:
        shown = "unavailable"
    tail = f"  {extra}" if extra else ""
    return f"  {marker:<13}{label:<28}{shown}  [{result.scope}; {result.method}]{tail}"


def _grad_text(caller: bool, workload: bool | None) -> str:
    """Grad mode as the workload's operators saw it, when a pass observed it."""
    if workload is None:
        return f"{'on' if caller else 'off'} (caller; the workload's own mode not observed)"
    return f"{'on' if workload else 'off'} (observed in the workload)"


def format_summary(report: BenchmarkReport) -> str:
    """A person-readable summary of a BenchmarkReport (never parse it: use the JSON)."""
    ex = report.execution
    lines = [
        f"BenchmarkReport {report.name or '(unnamed)'}: device {ex.device}, threads "
        f"{ex.num_threads} (interop {ex.num_interop_threads}), grad "
        f"{_grad_text(ex.grad_enabled, ex.workload_grad_enabled)}, "
        f"precision {ex.precision or 'not declared'}, "
        f"training {'not declared' if ex.training is None else ex.training}",
        f"  one call = {report.work_units:g} {report.unit}; workload calls per pass: "
        + (", ".join(f"{k}={v}" for k, v in ex.calls.items()) or "none"),
    ]
    if report.latency is not None:
        lat = report.latency
        lines.append(_line("first-call latency", lat.first_call))
        extra = ""
        if lat.stats is not None:
            extra = (
                f"IQR/median {lat.stats.iqr / lat.stats.median:.2%}, "
                if lat.stats.median > 0
                else ""
            ) + f"{lat.stats.blocks} blocks x {lat.stats.calls_per_block} calls"
        if any(d.code == "latency_noisy" for d in report.diagnostics):
            extra += "  ! NOISY, see diagnostics"
        lines.append(_line("warmed latency (median)", lat.warmed, extra))
        lines.append(_line("throughput", lat.throughput))
    if report.memory is not None:
        for result in report.memory.results:
            lines.append(_line(f"peak {result.scope}", result))
    if report.flops is not None:
        lines.append(_line("operator FLOPs (one call)", report.flops.total))
        if report.flops.product_flops is not None:
            lines.append(_line("  of which tensor products", report.flops.product_flops))
    if report.profile is not None:
        prof = report.profile
        lines.append(f"  [instrumented] profiler, top operators by {prof.sort_by} (not latency):")
        for op in prof.operators[:5]:
            lines.append(
                f"      {op.name:<32} calls {op.calls:<5} "
                f"self CPU {_number(op.self_cpu_time_s, 's')}"
            )
    if report.rss is not None:
        rss = report.rss
        lines.append(
            _line(
                "peak RSS (fresh process)",
                rss.peak,
                f"exit {rss.exit_code}, {rss.wall_time_s:.2f} s",
            )
        )
        for phase in rss.phases:
            lines.append(_line(f"  phase {phase.name}", phase.peak_rss))
    diagnostics = list(report.diagnostics)
    if diagnostics:
        lines.append("  diagnostics:")
        for diagnostic in diagnostics:
            where = f" ({diagnostic.metric})" if diagnostic.metric else ""
            lines.append(
                f"    ! {diagnostic.severity} {diagnostic.code}{where}: {diagnostic.message}"
            )
    lines.append("  scopes differ and are never summed; JSON is the machine interface")
    return "\n".join(lines)


def _validate(
    workload: object,
    flags: Mapping[str, object],
    work_units: object,
    unit: object,
    name: object,
    latency_options: Mapping[str, Any] | None,
    precision: object,
    training: object,
) -> dict[str, Any]:
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
    options = dict(latency_options or {})
    unknown = sorted(set(options) - _LATENCY_OPTIONS)
    if unknown:
        raise ValueError(
            f"latency_options has unknown key(s) {unknown}; allowed: {sorted(_LATENCY_OPTIONS)}"
        )
    defaults = {
        k: p.default
        for k, p in inspect.signature(run_latency).parameters.items()
        if k in _LATENCY_OPTIONS
    }
    merged = {**defaults, **options}
    validate_latency_options(
        work_units=work_units,  # type: ignore[arg-type]
        unit=unit,  # type: ignore[arg-type]
        **{k: v for k, v in merged.items()},
    )
    return merged


def measure_workload(
    workload: Workload,
    *,
    flops: bool = True,
    memory: bool = True,
    latency: bool = True,
    profile: bool = False,
    rss_command: Sequence[str] | None = None,
    work_units: float = 1,
    unit: str = "samples",
    device: str | torch.device | None = None,
    name: str | None = None,
    progress: bool | TextIO = True,
    file: TextIO | None = None,
    precision: str | None = None,
    training: bool | None = None,
    latency_options: Mapping[str, Any] | None = None,
    rss_timeout: float = DEFAULT_TIMEOUT_S,
    profile_row_limit: int = DEFAULT_ROW_LIMIT,
    profile_trace_path: str | None = None,
) -> BenchmarkReport:
    """Run the selected passes separately and return one BenchmarkReport; print a summary.

    ``progress`` (True = stderr, False = silent, or a text file) reports each pass as it
    starts and ends; the summary goes to ``file`` (stdout by default). ``precision`` and
    ``training`` are declarations recorded as given (the workload owns them).
    ``latency_options`` forwards measure_latency's tuning keywords. ``rss_command`` runs
    as a fresh child (see measure_peak_rss) and must rebuild the workload by itself.
    """
    options = _validate(
        workload,
        {"flops": flops, "memory": memory, "latency": latency, "profile": profile},
        work_units,
        unit,
        name,
        latency_options,
        precision,
        training,
    )
    validate_profile_options(profile_row_limit, "self_cpu_time_total", profile_trace_path, 1)
    rss_argv: list[str] | None = None
    if rss_command is not None:
        rss_argv = validate_rss_options(rss_command, rss_timeout, None, None, 0.02)[0]
    resolved = resolve_device(device)
    stream = _progress_stream(progress)
    out = file if file is not None else sys.stdout

    passes = [
        p
        for p, on in (
            ("latency", latency),
            ("memory", memory),
            ("flops", flops),
            ("profile", profile),
            ("rss", rss_argv is not None),
        )
        if on
    ]
    calls: dict[str, int] = {}
    diagnostics: list[Diagnostic] = []
    report_parts: dict[str, Any] = {}
    observed_grad: bool | None = None

    def note(message: str) -> None:
        if stream is not None:
            stream.write(f"[measure_workload] {message}\n")
            stream.flush()

    for index, pass_name in enumerate(passes, start=1):
        note(f"({index}/{len(passes)}) {pass_name} ...")
        started = time.perf_counter()
        status = "done"
        if pass_name == "latency":
            run = run_latency(
                workload,
                work_units=work_units,
                unit=unit,
                device=resolved,
                progress=note,
                **options,
            )
            report_parts["latency"] = run.section
            diagnostics += run.diagnostics
            calls["latency"] = run.calls
            status = MARKERS[run.section.warmed.status]
        elif pass_name == "memory":
            mem = run_peak_memory(workload, resolved)
            if observed_grad is None:
                observed_grad = mem.grad_enabled
            report_parts["memory"] = mem.section
            diagnostics += mem.diagnostics
            calls["memory"] = mem.calls
            status = " ".join(MARKERS[r.status] for r in mem.section.results)
        elif pass_name == "flops":
            flop_report, flops_grad = _run_flops(workload, diagnostics)
            if observed_grad is None:
                observed_grad = flops_grad
            report_parts["flops"] = flop_report
            calls["flops"] = flop_report.workload_calls
            status = MARKERS[flop_report.total.status]
        elif pass_name == "profile":
            prof = run_profile(
                workload, resolved, row_limit=profile_row_limit, trace_path=profile_trace_path
            )
            report_parts["profile"] = prof.section
            diagnostics += prof.diagnostics
            calls["profile"] = prof.calls
            status = "[instrumented]"
        else:
            assert rss_argv is not None
            rss_report = measure_peak_rss(rss_argv, timeout=rss_timeout)
            report_parts["rss"] = rss_report.rss
            diagnostics += rss_report.diagnostics
            status = MARKERS[rss_report.rss.peak.status] if rss_report.rss else "[n/a]"
        note(
            f"({index}/{len(passes)}) {pass_name} {status} in {time.perf_counter() - started:.2f} s"
        )

    report = BenchmarkReport(
        provenance=build_provenance(),
        name=name,
        work_units=work_units,
        unit=unit,
        execution=execution_record(
            resolved,
            calls,
            precision=precision,
            training=training,
            workload_grad_enabled=observed_grad,
        ),
        diagnostics=diagnostics,
        **report_parts,
    )
    out.write(format_summary(report) + "\n")
    out.flush()
    return report


def _run_flops(workload: Workload, diagnostics: list[Diagnostic]) -> tuple[FlopReport, bool | None]:
    """Operator FLOPs via the analysis package, imported only when this pass runs, and the
    grad mode the workload's operators ran under.

    Its diagnostics (uncounted operators) join the report's own list, so status and
    diagnostics stay together wherever the report is read.
    """
    from ..analysis.operators import count_workload

    report, grad = count_workload(workload)
    diagnostics += report.diagnostics
    return report, grad


__all__ = ["format_summary", "measure_workload"]
