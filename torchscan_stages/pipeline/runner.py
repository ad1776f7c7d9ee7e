"""What every stage shares: load config, set provenance, write reports and flat metrics.

A stage module declares the top-level config keys it reads (exactly its ``params`` in
dvc.yaml; only those go into its reports' provenance) and a ``run(ctx)`` body with one
library call. :func:`run_stage` turns a configuration problem into one line on stderr and
exit status 2, before anything is written, so previous outputs stay untouched.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .loader import read_params, to_plain, under_dvc
from .schema import ConfigError, PipelineConfig, config_section, validate_config

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..report import BaseReport, MetricResult, RunContext
    from ..report.evidence import MetricEvidence

WORKLOAD_KEYS = ("model", "input", "device", "precision", "threads", "seed")
# What a counting stage (crawl, flops, memory, predict) reads: the workload without
# ``threads``, which changes how fast it runs, never what it counts; so changing ``threads``
# reruns only the stages that time (dvc.yaml's params lists are these keys).
COUNT_KEYS = tuple(key for key in WORKLOAD_KEYS if key != "threads")
EXIT_CONFIG_ERROR = 2


@dataclass
class StageContext:
    """One stage run: validated config, the raw section it reads, where outputs go.

    Reports, metrics and plot data are staged, not written: the runner writes them all
    together once the body has finished (see :func:`commit_outputs`), so a failure to write
    one never leaves a new report beside old metrics.
    """

    stage: str
    config: PipelineConfig
    section: dict[str, Any]
    output_dir: Path
    run: RunContext
    headline: list[str] = field(default_factory=list)
    pending: dict[Path, str] = field(default_factory=dict)
    host_share: Any = None  # hostlock.HostShare of a timing stage: stamped on its reports

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        """Around a timing stage's timed work only: the host's timing lock is held within
        (imports, model builds and writes stay outside, so another checkout's timing stage
        waits only while this one times); what it shared and waited goes on its reports."""
        from .hostlock import timing_slot

        with timing_slot(self.stage) as share:
            if share is not None:
                self.host_share = share
            yield

    def report_path(self, name: str | None = None) -> Path:
        return self.output_dir / "reports" / f"{name or self.stage}.json"

    def metrics_path(self, name: str | None = None) -> Path:
        return self.output_dir / "metrics" / f"{name or self.stage}.json"

    def plot_path(self, name: str) -> Path:
        return self.output_dir / "plots" / f"{name}.json"

    def write_report(self, report: BaseReport, name: str | None = None) -> Path:
        path = self.report_path(name)
        if self.host_share is not None:
            stamps = self.host_share.diagnostics()
            report = report.model_copy(update={"diagnostics": [*report.diagnostics, *stamps]})
        from ..report import report_text  # the compact form save_report writes

        self.pending[path] = report_text(report)
        return path

    def write_metrics(
        self,
        values: dict[str, Any],
        name: str | None = None,
        evidence: Mapping[str, MetricEvidence] | None = None,
    ) -> Path:
        """Flat metrics (DVC ``metrics``): complete numbers only, sorted stable keys; and
        beside them ``<name>.evidence.json``: per key, the value's status and validity
        warnings (``evidence``; a key without one is a plain complete value, or unavailable
        when its value is None). Both are staged and written together, atomically."""
        from ..provenance import build_provenance
        from ..report import report_text
        from ..report.evidence import SIDECAR_SUFFIX, MetricsEvidence
        from .evidence import keys_evidence

        flat = {key: values[key] for key in sorted(values) if values[key] is not None}
        path = self.metrics_path(name)
        self.pending[path] = json.dumps(flat, indent=2) + "\n"
        sidecar = MetricsEvidence(
            provenance=build_provenance(),
            stage=name or self.stage,
            metrics=keys_evidence(values, evidence),
        )
        self.pending[path.with_name(path.stem + SIDECAR_SUFFIX)] = report_text(sidecar)
        return path

    def write_plot(self, rows: list[dict[str, Any]], name: str) -> Path:
        """DVC plots data: a JSON list of flat rows (complete values only)."""
        path = self.plot_path(name)
        self.pending[path] = json.dumps(rows, indent=1) + "\n"
        return path


def commit_outputs(pending: dict[Path, str]) -> list[Path]:
    """Write every staged output to a temporary file first, then rename them all.

    If any temporary file cannot be written (an unwritable ``metrics/``, a full disk),
    nothing is renamed and every earlier output stays as it was. Temporaries that an
    earlier, killed stage left beside an output are removed, as ``atomic_write_text`` does.
    """
    # atomic_write_text's two phases, for every file at once
    from ..report import clean_stale_temporaries, write_temporary

    started = time.time()
    staged: list[tuple[str, Path]] = []
    try:
        for path, text in pending.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            staged.append((write_temporary(path, text), path))
    except BaseException:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    from .._signals import signals_deferred

    with signals_deferred():  # Ctrl-C or SIGTERM here would leave half the outputs renamed
        for tmp, path in staged:
            os.replace(tmp, path)
    for tmp, path in staged:
        clean_stale_temporaries(path, started, os.path.basename(tmp))
    return [path for _, path in staged]


def complete_value(result: MetricResult | None) -> float | int | None:
    """The value of a complete result; ``None`` for partial/unavailable (never a zero)."""
    if result is None or result.status != "complete":
        return None
    return result.value


def run_context(stage: str, raw: dict[str, Any], keys: tuple[str, ...]) -> RunContext:
    """Provenance run context: the stage's config section, revisions, seed, git state."""
    from ..provenance import git_state
    from ..report import RunContext

    commit, dirty = git_state()
    model = raw.get("model") if "model" in keys else None
    inputs = raw.get("input") if "input" in keys else None
    return RunContext(
        config=config_section(raw, keys),
        model_name=model.get("name") if isinstance(model, dict) else None,
        model_revision=str(model.get("revision")) if isinstance(model, dict) else None,
        input_name=inputs.get("name") if isinstance(inputs, dict) else None,
        input_revision=str(inputs.get("revision")) if isinstance(inputs, dict) else None,
        seed=raw.get("seed") if "seed" in keys else None,
        git_commit=commit,
        git_dirty=dirty,
        stage=stage,
    )


@dataclass(frozen=True)
class StageSpec:
    """What a stage is: its name, the config keys it reads, its body and its help."""

    stage: str
    keys: tuple[str, ...]
    body: Callable[[StageContext], None]
    required: tuple[str, ...] = ()
    about: str = ""
    writes: tuple[str, ...] = ()


def _execute(spec: StageSpec, raw: dict[str, Any], output_dir: Path) -> str:
    """Validate, run the body, write its outputs together; returns the result line."""
    from ..provenance import set_run_context
    from .feedback import result_line

    config = validate_config(raw, required=spec.required)
    run = run_context(spec.stage, raw, spec.keys)
    set_run_context(run)
    try:
        ctx = StageContext(spec.stage, config, config_section(raw, spec.keys), output_dir, run)
        try:  # a timing stage takes the host's timing lock in ctx.timed(), around its timing
            spec.body(ctx)
        except (ConfigError, OutputError):
            raise
        except Exception as error:
            raise _workload_failed(config, error) from error
    finally:
        set_run_context(None)
    try:
        written = commit_outputs(ctx.pending)
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        raise OutputError(
            f"cannot write outputs{where}: {error.strerror or error}; "
            "nothing was replaced, the previous reports and metrics stay"
        ) from None
    return result_line(spec.stage, ctx.headline, written)


class OutputError(RuntimeError):
    """The stage's outputs could not be written (nothing was replaced)."""


class WorkloadError(RuntimeError):
    """The configured workload failed while the stage ran it (nothing was written)."""


TRACEBACK_ENV = "TORCHSCAN_STAGES_TRACEBACK"


def _workload_failed(config: PipelineConfig, error: Exception) -> Exception:
    """One line naming the model and input configs and the error; the traceback only when
    ``TORCHSCAN_STAGES_TRACEBACK=1`` (a model and an input that do not fit, such as
    ``model=gpt2 input=image``, are a config mistake, not a crash to debug)."""
    if os.environ.get(TRACEBACK_ENV) == "1":
        return error
    text = " ".join(str(error).split())[:400] or repr(error)
    return WorkloadError(
        f"the workload failed: model {config.model.name!r} ({config.model.target}) on input "
        f"{config.input.name!r} ({config.input.target}) raised {type(error).__name__}: {text}; "
        "check that the model and input configs fit together (set TORCHSCAN_STAGES_TRACEBACK=1 "
        "for the traceback); nothing was written"
    )


class StageFailed(RuntimeError):
    """A job of a multirun failed; Hydra records it and goes on with the other jobs."""


EXIT_OUTPUT_ERROR = 1


def _fail(stage: str, error: Exception) -> int:
    print(f"{stage}: {error}", file=sys.stderr)
    failed = isinstance(error, (OutputError, WorkloadError))
    return EXIT_OUTPUT_ERROR if failed else EXIT_CONFIG_ERROR


def run_stage(
    stage: str,
    keys: tuple[str, ...],
    body: Callable[[StageContext], None],
    argv: Sequence[str] | None = None,
    *,
    required: tuple[str, ...] = (),
    about: str = "",
    writes: tuple[str, ...] = (),
) -> int:
    """Run a stage under DVC (params.yaml) or as a Hydra app (overrides, ``-m``)."""
    spec = StageSpec(stage, keys, body, required, about, writes)
    args = list(sys.argv[1:] if argv is None else argv)
    if any(arg in ("-h", "--help") for arg in args):
        from .feedback import help_text

        print(help_text(stage, about, keys, writes or (f"reports/{stage}.json",)))
        return 0
    if under_dvc(args):
        try:
            print(_execute(spec, read_params(), Path.cwd()), flush=True)
        except (ConfigError, OutputError, WorkloadError) as error:
            return _fail(stage, error)
        return 0
    return _run_hydra(spec, args)


def _emit(line: str) -> None:
    """Print the result line; under Hydra's job logging it also goes to the job's log file."""
    import logging

    logger = logging.getLogger("torchscan_stages.stages")
    if logging.getLogger().handlers:
        logger.info(line)
    else:  # hydra/job_logging=disabled: nothing would show it
        print(line, flush=True)


def _run_hydra(spec: StageSpec, args: list[str]) -> int:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from .loader import CONFIG_NAME, find_conf_dir

    try:
        conf_dir = find_conf_dir()
    except ConfigError as error:
        return _fail(spec.stage, error)

    def task(cfg: Any) -> str:
        output_dir = Path(HydraConfig.get().runtime.output_dir)
        multirun = HydraConfig.get().mode == RunMode.MULTIRUN
        try:
            _emit(_execute(spec, to_plain(cfg), output_dir))
        except (ConfigError, OutputError, WorkloadError) as error:
            if multirun:
                return _job_failed(spec.stage, error, output_dir)
            raise SystemExit(_fail(spec.stage, error)) from None
        except Exception as error:
            if multirun and not os.environ.get("HYDRA_FULL_ERROR"):
                return _job_failed(spec.stage, error, output_dir, with_traceback=True)
            raise
        return str(output_dir)

    saved = sys.argv
    named = any(a.startswith("hydra.job.name=") for a in args)
    # Appended, not prepended: argparse cannot resume positionals after a flag such as -m.
    sys.argv = [f"torchscan_stages.stages.{spec.stage}", *args]
    if not named:
        sys.argv.append(f"hydra.job.name={spec.stage}")
    try:
        hydra.main(config_path=str(conf_dir), config_name=CONFIG_NAME, version_base=None)(task)()
    finally:
        sys.argv = saved
    from .job_status import last_sweep_failures

    return 1 if last_sweep_failures() else 0  # a sweep with a failed job exits non-zero


def _job_failed(
    stage: str, error: Exception, output_dir: Path, with_traceback: bool = False
) -> str:
    """One failed job of a multirun: one stderr line now, its status beside its folder, and
    the sweep goes on; the summary lists every failed job in one block at the end (no Hydra
    traceback: ``HYDRA_FULL_ERROR=1`` lets an unexpected error propagate with it)."""
    import traceback

    from .job_status import write_job_status

    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    what = (
        f"{stage}: {text}"
        if isinstance(error, ConfigError | OutputError | WorkloadError)
        else (f"{stage}: {type(error).__name__}: {text}")
    )
    if with_traceback:
        output_dir.mkdir(parents=True, exist_ok=True)
        trace = output_dir / "traceback.txt"
        trace.write_text("".join(traceback.format_exception(error)), encoding="utf-8")
        what += f" (traceback: {trace})"
    print(what, file=sys.stderr, flush=True)
    write_job_status(output_dir, "failed", StageFailed(what))
    return str(output_dir)


def stage_main(
    stage: str,
    keys: tuple[str, ...],
    body: Callable[[StageContext], None],
    *,
    required: tuple[str, ...] = (),
    about: str = "",
    writes: tuple[str, ...] = (),
) -> None:
    """``if __name__ == "__main__"`` entry: exit with the stage's status.

    Ctrl-C (SIGINT), SIGTERM and SIGHUP end the stage with one line and the shell's code for
    death by that signal (130, 143, 129): the unwinding removed its temporaries, and nothing
    was replaced (outputs are renamed together, after the work)."""
    from .._signals import Terminated, ending_signals_raise

    try:
        with ending_signals_raise(redeliver=False):
            code = run_stage(stage, keys, body, required=required, about=about, writes=writes)
    except KeyboardInterrupt:
        code = _interrupted(stage, "SIGINT (Ctrl-C)", 128 + signal.SIGINT)
    except Terminated as ended:
        code = _interrupted(stage, signal.Signals(ended.number).name, ended.exit_code)
    sys.exit(code)


def _interrupted(stage: str, what: str, code: int) -> int:
    print(
        f"{stage}: interrupted by {what}; nothing was replaced, the previous reports and "
        "metrics stay",
        file=sys.stderr,
        flush=True,
    )
    return code


def budget_outcome(
    metrics: dict[str, Any], name: str, result: MetricResult | None, budget: float | None
) -> list[Any]:
    """Compare a complete metric with an owner budget; diagnostics for the report.

    No budget, no check. An incomplete metric is never judged against a budget.
    """
    from ..report import Diagnostic

    if budget is None:
        return []
    value = complete_value(result)
    metrics[f"{name}_budget"] = budget
    if value is None:
        return [
            Diagnostic(
                code="budget_not_checked",
                severity="warning",
                metric=name,
                message=f"budget {budget} not checked: the metric is not complete",
            )
        ]
    within = value <= budget
    metrics[f"{name}_within_budget"] = int(within)
    return [
        Diagnostic(
            code="within_budget" if within else "over_budget",
            severity="info" if within else "error",
            metric=name,
            message=f"{name} = {value} against the owner's budget {budget}",
        )
    ]


def precision_label(precision: Any) -> str:
    """``fp32 (float32, cast)``: a precision config entry as execution records name it."""
    return f"{precision.name} ({precision.dtype}, {precision.apply})"


def record_execution(
    report: Any, precision: Any, config: Any = None, *, threads: bool = False
) -> None:
    """Stamp what the pipeline configured on a BenchmarkReport's execution record, so that
    readers never look it up in the run's config: the precision, evaluation mode and, with
    ``config``, the input's name and work per call (a report that kept the default one call)
    and, where the stage applied them (``threads``), the configured threads."""
    execution = getattr(report, "execution", None)
    if execution is None:
        return
    execution.precision = precision_label(precision)
    execution.training = False
    if config is None:
        return
    execution.input_name = config.input.name
    if threads:
        execution.threads = config.threads
    if report.unit == "calls" and report.work_units == 1:
        report.work_units, report.unit = config.input.work_units, config.input.unit


__all__ = [
    "COUNT_KEYS",
    "EXIT_CONFIG_ERROR",
    "EXIT_OUTPUT_ERROR",
    "WORKLOAD_KEYS",
    "OutputError",
    "StageContext",
    "StageSpec",
    "WorkloadError",
    "budget_outcome",
    "commit_outputs",
    "complete_value",
    "precision_label",
    "read_params",
    "record_execution",
    "run_stage",
    "stage_main",
]
