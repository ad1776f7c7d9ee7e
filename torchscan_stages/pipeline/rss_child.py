"""The fresh child of the rss stage: rebuild the same workload, run it once, mark phases.

    python -m torchscan_stages.pipeline.rss_child --config-file CONFIG.json [--execution-file OUT]
    python -m torchscan_stages.pipeline.rss_child '<validated config as JSON>'   # small ones

It validates the config with the same schema and builds the workload with the same builder
as every other stage, so the parent measures the process-level cost of exactly that run:
imports, building (model and inputs) and one execution, each marked as a phase.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    import torch

    from ..measure.rss_phases import mark_phase
    from .schema import ConfigError, validate_config
    from .workload import build_workload, check_threads

    mark_phase("import")
    args = sys.argv[1:] if argv is None else argv
    execution_file = None
    if len(args) >= 2 and args[-2] == "--execution-file":
        execution_file, args = Path(args[-1]), args[:-2]
    if len(args) == 2 and args[0] == "--config-file":
        try:
            text = Path(args[1]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            print(f"rss_child: cannot read --config-file {args[1]}: {error}", file=sys.stderr)
            return 2
    elif len(args) == 1:
        text = args[0]
    else:
        print("rss_child: expected --config-file PATH (or the config as JSON)", file=sys.stderr)
        return 2
    try:
        config = validate_config(json.loads(text))
        check_threads(config.threads)
        torch.set_num_threads(config.threads)
        workload = build_workload(config)
    except (ConfigError, json.JSONDecodeError) as error:
        print(f"rss_child: {error}", file=sys.stderr)
        return 2
    if execution_file is not None:
        _write_execution(execution_file)
    mark_phase("build")
    workload()
    if workload.device.type == "cuda":
        torch.cuda.synchronize(workload.device)
    mark_phase("execute")
    return 0


def _write_execution(path: Path) -> None:
    """The thread and grad settings this child applied, for the parent's report: the work
    runs here, so the parent's own settings describe nothing measured."""
    import torch

    record = {
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
        "grad_enabled": torch.is_grad_enabled(),
    }
    path.write_text(json.dumps(record), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
