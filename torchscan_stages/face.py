"""The two public functions that print: ``summary()`` and ``measure_workload()``.

They sit on the face because each joins layers that never import each other: ``summary``
crawls (analysis) and prints the table (render); ``measure_workload`` runs the passes
(measure) with analysis' operator counter for the FLOP pass, and prints the summary
(render). Below this module, analysis and measure return reports and never print.

Never: computes a number of its own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

import torch
from torch import nn

from .analysis.call_values import held_parameters
from .analysis.crawl import Mode, crawl_module
from .analysis.handlers import ModuleHandler
from .analysis.operators import count_workload
from .measure.latency_options import LatencyOptions, moved_into_options
from .measure.profile import DEFAULT_ROW_LIMIT
from .measure.rss import DEFAULT_TIMEOUT_S
from .measure.workload import PassPlan, run_passes
from .render.summary import format_table
from .render.text import benchmark_summary
from .report import AnalysisReport, BenchmarkReport, IncompleteAnalysisError
from .workloads import Workload


# too many arguments: the public spec fixes summary's signature (crawl_module's plus two)
def summary(  # noqa: PLR0913
    module: nn.Module,
    input_shape: Sequence[int] | Sequence[Sequence[int]] | None = None,
    *,
    args: Any = None,
    kwargs: Mapping[str, Any] | None = None,
    dtype: torch.dtype | Sequence[torch.dtype] | None = None,
    device: str | torch.device | None = None,
    mode: Mode = "full",
    strict: bool = False,
    custom_mapping: Mapping[Any, Any] | None = None,
    custom_modules: Mapping[type[nn.Module], ModuleHandler] | None = None,
    fill_from_operators: bool | Iterable[type[nn.Module]] = False,
    max_depth: int | None = None,
    file: TextIO | None = None,
) -> AnalysisReport:
    """Print the cost table of one forward call and return its AnalysisReport.

    Under ``strict=True`` an incomplete analysis still prints its table (with the partial
    markers and diagnostics a person needs) before IncompleteAnalysisError is raised.
    """
    if max_depth is not None and (
        isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0
    ):
        raise ValueError(f"max_depth must be a non-negative int or None, got {max_depth!r}")
    out = file if file is not None else sys.stdout
    is_module = isinstance(module, nn.Module)
    types = {path: type(sub).__name__ for path, sub in module.named_modules()} if is_module else {}
    held = held_parameters(module) if is_module else None
    try:
        report = crawl_module(
            module,
            input_shape,
            args=args,
            kwargs=kwargs,
            dtype=dtype,
            device=device,
            mode=mode,
            strict=strict,
            custom_mapping=custom_mapping,
            custom_modules=custom_modules,
            fill_from_operators=fill_from_operators,
        )
    except IncompleteAnalysisError as error:
        if isinstance(error.report, AnalysisReport):
            print(format_table(error.report, max_depth, types, held), end="", file=out)
        raise
    print(format_table(report, max_depth, types, held), end="", file=out)
    return report


# too many arguments: the public spec fixes measure_workload's passes and work keywords;
# the rest are per-pass inputs of the one call that prints (timing settings are in options=)
@moved_into_options(options=LatencyOptions, renamed={"latency_options": "options"})
def measure_workload(  # noqa: PLR0913
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
    rss_timeout: float = DEFAULT_TIMEOUT_S,
    profile_row_limit: int = DEFAULT_ROW_LIMIT,
    profile_trace_path: str | None = None,
    options: Mapping[str, Any] | LatencyOptions | None = None,
) -> BenchmarkReport:
    """Run the selected passes separately and return one BenchmarkReport; print a summary.

    ``progress`` (True = stderr, False = silent, or a text file) reports each pass as it
    starts and ends; the summary goes to ``file`` (stdout by default). ``precision`` and
    ``training`` are declarations recorded as given (the workload owns them). ``options``
    (a :class:`LatencyOptions` or a mapping of its field names) is the timing pass's one way
    in, as for measure_latency and compare_benchmarks. ``rss_command`` runs as a fresh child
    (see measure_peak_rss) and must rebuild the workload by itself.
    """
    plan = PassPlan(
        flops=flops,
        memory=memory,
        latency=latency,
        profile=profile,
        rss_command=rss_command,
        work_units=work_units,
        unit=unit,
        device=device,
        name=name,
        precision=precision,
        training=training,
        options=options,
        rss_timeout=rss_timeout,
        profile_row_limit=profile_row_limit,
        profile_trace_path=profile_trace_path,
    )
    report = run_passes(workload, plan, count_flops=count_workload, progress=progress)
    out = file if file is not None else sys.stdout
    out.write(benchmark_summary(report) + "\n")
    out.flush()
    return report


__all__ = ["measure_workload", "summary"]
