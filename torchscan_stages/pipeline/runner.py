"""What every stage shares: load config, set provenance, write reports and flat metrics.

A stage module declares the top-level config keys it reads (exactly its ``params`` in
dvc.yaml; only those go into its reports' provenance) and a ``run(ctx)`` body with one
library call. :func:`run_stage` turns a configuration problem into one line on stderr and
exit status 2, before anything is written, so previous outputs stay untouched.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .loader import read_params, to_plain, under_dvc
from .schema import ConfigError, PipelineConfig, config_section, validate_config

if TYPE_CHECKING:
    from ..report import MetricResult, RunContext, _Report

WORKLOAD_KEYS = ("model", "input", "device", "precision", "threads", "seed")
EXIT_CONFIG_ERROR = 2


@dataclass
class StageContext:
    """One stage run: validated config, the raw section it reads, where outputs go."""

    stage: str
    config: PipelineConfig
    section: dict[str, Any]
    output_dir: Path
    run: RunContext

    def report_path(self, name: str | None = None) -> Path:
        return self.output_dir / "reports" / f"{name or self.stage}.json"

    def metrics_path(self, name: str | None = None) -> Path:
        return self.output_dir / "metrics" / f"{name or self.stage}.json"

    def write_report(self, report: _Report, name: str | None = None) -> Path:
        return report.save(self.report_path(name))

    def write_metrics(self, values: dict[str, Any], name: str | None = None) -> Path:
        """Flat metrics (DVC ``metrics``): complete numbers only, sorted stable keys."""
        from ..report import atomic_write_text

        flat = {key: values[key] for key in sorted(values) if values[key] is not None}
        return atomic_write_text(self.metrics_path(name), json.dumps(flat, indent=2) + "\n")


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


def _execute(
    stage: str,
    keys: tuple[str, ...],
    required: tuple[str, ...],
    body: Callable[[StageContext], None],
    raw: dict[str, Any],
    output_dir: Path,
) -> None:
    from ..provenance import set_run_context

    config = validate_config(raw, required=required)
    run = run_context(stage, raw, keys)
    set_run_context(run)
    try:
        body(StageContext(stage, config, config_section(raw, keys), output_dir, run))
    finally:
        set_run_context(None)


def _fail(stage: str, error: ConfigError) -> int:
    print(f"{stage}: {error}", file=sys.stderr)
    return EXIT_CONFIG_ERROR


def run_stage(
    stage: str,
    keys: tuple[str, ...],
    body: Callable[[StageContext], None],
    argv: Sequence[str] | None = None,
    *,
    required: tuple[str, ...] = (),
) -> int:
    """Run a stage under DVC (params.yaml) or as a Hydra app (overrides, ``-m``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if under_dvc(args):
        try:
            _execute(stage, keys, required, body, read_params(), Path.cwd())
        except ConfigError as error:
            return _fail(stage, error)
        return 0
    return _run_hydra(stage, keys, required, body, args)


def _run_hydra(
    stage: str,
    keys: tuple[str, ...],
    required: tuple[str, ...],
    body: Callable[[StageContext], None],
    args: list[str],
) -> int:
    import hydra
    from hydra.core.hydra_config import HydraConfig

    from .loader import CONFIG_NAME, find_conf_dir

    try:
        conf_dir = find_conf_dir()
    except ConfigError as error:
        return _fail(stage, error)

    def task(cfg: Any) -> str:
        output_dir = Path(HydraConfig.get().runtime.output_dir)
        try:
            _execute(stage, keys, required, body, to_plain(cfg), output_dir)
        except ConfigError as error:
            raise SystemExit(_fail(stage, error)) from None
        return str(output_dir)

    saved = sys.argv
    named = any(a.startswith("hydra.job.name=") for a in args)
    # Appended, not prepended: argparse cannot resume positionals after a flag such as -m.
    sys.argv = [f"torchscan_stages.stages.{stage}", *args]
    if not named:
        sys.argv.append(f"hydra.job.name={stage}")
    try:
        hydra.main(config_path=str(conf_dir), config_name=CONFIG_NAME, version_base=None)(task)()
    finally:
        sys.argv = saved
    return 0


def stage_main(
    stage: str,
    keys: tuple[str, ...],
    body: Callable[[StageContext], None],
    *,
    required: tuple[str, ...] = (),
) -> None:
    """``if __name__ == "__main__"`` entry: exit with the stage's status."""
    sys.exit(run_stage(stage, keys, body, required=required))


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


def record_execution(report: Any, precision: Any) -> None:
    """Stamp the configured precision and evaluation mode on a BenchmarkReport."""
    if getattr(report, "execution", None) is not None:
        report.execution.precision = f"{precision.name} ({precision.dtype}, {precision.apply})"
        report.execution.training = False


__all__ = [
    "EXIT_CONFIG_ERROR",
    "WORKLOAD_KEYS",
    "StageContext",
    "budget_outcome",
    "complete_value",
    "read_params",
    "record_execution",
    "run_stage",
    "stage_main",
]
