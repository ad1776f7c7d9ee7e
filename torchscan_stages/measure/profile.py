"""An instrumented torch.profiler pass: which operators the workload spends time in.

Separate from clean timing by design: profiler self times include instrumentation overhead
and nested operators overlap, so they explain where time goes but are never latency.
``warmup_calls`` run outside the profiler first so the profile shows steady-state work.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from ..devices import check_workload, execution_record, make_synchronize, resolve_device
from ..provenance import build_provenance
from ..report import BenchmarkReport, Diagnostic, ProfiledOperator, ProfileSection
from ..workloads import Workload, lazy_output_diagnostic

SORT_KEYS = (
    "self_cpu_time_total",
    "cpu_time_total",
    "self_device_time_total",
    "device_time_total",
    "count",
)
DEFAULT_ROW_LIMIT = 20
MAX_SHAPES_PER_OPERATOR = 5
_US = 1e-6


@dataclass
class ProfileRun:
    section: ProfileSection
    diagnostics: list[Diagnostic] = field(default_factory=list)
    calls: int = 0


def validate_profile_options(
    row_limit: object, sort_by: object, trace_path: object, warmup_calls: object
) -> None:
    """Refuse bad options before the workload runs."""
    if isinstance(row_limit, bool) or not isinstance(row_limit, int) or row_limit < 1:
        raise ValueError(f"row_limit must be an int >= 1, got {row_limit!r}")
    if sort_by not in SORT_KEYS:
        raise ValueError(f"sort_by must be one of {list(SORT_KEYS)}, got {sort_by!r}")
    if trace_path is not None and not isinstance(trace_path, (str, os.PathLike)):
        raise TypeError(f"trace_path must be a path or None, got {type(trace_path).__name__}")
    if trace_path is not None:
        check_trace_path(Path(trace_path))
    if isinstance(warmup_calls, bool) or not isinstance(warmup_calls, int) or warmup_calls < 0:
        raise ValueError(f"warmup_calls must be an int >= 0, got {warmup_calls!r}")


def check_trace_path(target: Path) -> None:
    """Refuse a trace path that cannot become a file, before the workload runs."""
    if target.is_dir():
        raise ValueError(
            f"trace_path={str(target)!r} is a directory; name the trace file to write, "
            f"such as {str(target / 'trace.json')!r}"
        )
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # the nearest existing folder is where mkdir starts
    if not folder.is_dir():
        raise ValueError(f"trace_path={str(target)!r}: {str(folder)!r} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"trace_path={str(target)!r}: directory {str(folder)!r} is not writable")


def _export_trace(prof: profile, target: Path) -> Diagnostic | None:
    """Write the Chrome trace atomically: into a private folder beside it, then rename.

    torch's exporter reports no failure and leaves its own temporary files beside the
    target, so the trace counts as written only when the renamed file exists.
    """
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            staged = scratch / target.name
            prof.export_chrome_trace(str(staged))
            if not staged.is_file():
                raise OSError(f"torch.profiler wrote no trace file to {str(staged)!r}")
            os.replace(staged, target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    except (OSError, RuntimeError) as error:
        return Diagnostic(
            code="trace_not_written",
            severity="error",
            metric="profile.trace_path",
            message=f"the Chrome trace could not be written to {str(target)!r}: {error}",
        )
    return None


def _device_us(event: Any, prefix: str) -> float:
    """Device time in microseconds; torch < 2.4 names it ``*cuda_time_total``."""
    value: Any = getattr(event, f"{prefix}device_time_total", None)
    if value is None:
        value = getattr(event, f"{prefix}cuda_time_total", 0.0)
    return float(value)


def _shapes(shapes: Any) -> str:
    return repr(shapes) if shapes is not None else "[]"


def _operators(prof: profile, has_device: bool) -> list[ProfiledOperator]:
    """One row per operator, with up to MAX_SHAPES_PER_OPERATOR distinct input shapes."""
    shapes: dict[str, list[str]] = {}
    for event in prof.key_averages(group_by_input_shape=True):
        listed = shapes.setdefault(event.key, [])
        text = _shapes(event.input_shapes)
        if text not in listed and len(listed) < MAX_SHAPES_PER_OPERATOR:
            listed.append(text)
    return [
        ProfiledOperator(
            name=event.key,
            calls=int(event.count),
            self_cpu_time_s=event.self_cpu_time_total * _US,
            cpu_time_total_s=event.cpu_time_total * _US,
            self_device_time_s=_device_us(event, "self_") * _US if has_device else None,
            device_time_total_s=_device_us(event, "") * _US if has_device else None,
            input_shapes=shapes.get(event.key, []),
        )
        for event in prof.key_averages()
    ]


_SORT_ATTRIBUTE = {
    "self_cpu_time_total": "self_cpu_time_s",
    "cpu_time_total": "cpu_time_total_s",
    "self_device_time_total": "self_device_time_s",
    "device_time_total": "device_time_total_s",
    "count": "calls",
}


def _sort(
    operators: list[ProfiledOperator], sort_by: str, device: torch.device, has_device: bool
) -> tuple[str, Diagnostic | None]:
    """Sort in place by ``sort_by``, or by self CPU time where no device time was recorded
    (said in an info diagnostic); returns the key used."""
    note = None
    if sort_by in ("self_device_time_total", "device_time_total") and not has_device:
        note = Diagnostic(
            code="profile_sort_without_device",
            severity="info",
            metric="profile",
            message=f"sort_by={sort_by!r} on {device.type}: no device times were recorded, "
            "operators are sorted by self CPU time instead",
        )
        sort_by = "self_cpu_time_total"
    attribute = _SORT_ATTRIBUTE[sort_by]
    operators.sort(key=lambda op: (getattr(op, attribute) or 0, op.name), reverse=True)
    return sort_by, note


def run_profile(
    workload: Workload,
    device: torch.device,
    *,
    row_limit: int = DEFAULT_ROW_LIMIT,
    sort_by: str = "self_cpu_time_total",
    trace_path: str | os.PathLike[str] | None = None,
    warmup_calls: int = 1,
) -> ProfileRun:
    """Warm up, then profile one synchronised call; operators sorted by ``sort_by``."""
    sync = make_synchronize(device)
    for _ in range(warmup_calls):
        workload()
    sync()
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities, record_shapes=True) as prof:
        output = workload()
        sync()
    lazy = lazy_output_diagnostic(output, "profile")
    del output
    has_device = device.type == "cuda"
    operators = _operators(prof, has_device)
    diagnostics: list[Diagnostic] = [lazy] if lazy is not None else []
    sort_by_used, note = _sort(operators, sort_by, device, has_device)
    if note is not None:
        diagnostics.append(note)
    written: str | None = None
    if trace_path is not None:
        failed = _export_trace(prof, Path(trace_path))
        if failed is None:
            written = str(trace_path)
        else:
            diagnostics.append(failed)
    section = ProfileSection(
        sort_by=sort_by_used,
        operators=operators[:row_limit],
        trace_path=written,
        activities=[activity.name for activity in activities],
        profiled_calls=1,
        warmup_calls=warmup_calls,
        row_limit=row_limit,
        operators_total=len(operators),
    )
    return ProfileRun(section=section, diagnostics=diagnostics, calls=warmup_calls + 1)


def profile_workload(
    workload: Workload,
    *,
    device: str | torch.device | None = None,
    row_limit: int = DEFAULT_ROW_LIMIT,
    sort_by: str = "self_cpu_time_total",
    trace_path: str | os.PathLike[str] | None = None,
    warmup_calls: int = 1,
    name: str | None = None,
) -> BenchmarkReport:
    """Profile one call of ``workload`` (after ``warmup_calls``) with torch.profiler.

    Operators by ``sort_by`` (one of SORT_KEYS), top ``row_limit``, with call counts and up
    to five distinct input-shape lists each; CUDA kernels too on a CUDA device. Optionally
    writes a Chrome trace to ``trace_path``. Labelled instrumented: never clean latency.
    """
    check_workload(workload)
    validate_profile_options(row_limit, sort_by, trace_path, warmup_calls)
    resolved = resolve_device(device)
    run = run_profile(
        workload,
        resolved,
        row_limit=row_limit,
        sort_by=sort_by,
        trace_path=trace_path,
        warmup_calls=warmup_calls,
    )
    return BenchmarkReport(
        provenance=build_provenance(),
        name=name,
        execution=execution_record(resolved, {"profile": run.calls}),
        profile=run.section,
        diagnostics=run.diagnostics,
    )
