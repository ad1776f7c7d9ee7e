"""Regenerate params.yaml from conf/ (what ``dvc exp run`` does with Hydra enabled).

python -m torchscan_stages.pipeline.compose            # write params.yaml
python -m torchscan_stages.pipeline.compose --check    # exit 1 when params.yaml drifted
python -m torchscan_stages.pipeline.compose model=transformer input=tokens
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .loader import PARAMS_FILE, compose_yaml, find_conf_dir
from .schema import ConfigError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchscan_stages.pipeline.compose")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. precision=bf16")
    parser.add_argument("--check", action="store_true", help="only report drift (exit 1)")
    parser.add_argument("--output", default=None, help=f"default: <repo>/{PARAMS_FILE}")
    args = parser.parse_args(argv)
    try:
        conf_dir = find_conf_dir()
        text = compose_yaml(args.overrides, conf_dir=conf_dir)
    except ConfigError as error:
        print(f"compose: {error}", file=sys.stderr)
        return 2
    target = Path(args.output) if args.output else conf_dir.parent / PARAMS_FILE
    current = target.read_text(encoding="utf-8") if target.exists() else None
    if args.check:
        if current != text:
            print(
                f"compose: {target} differs from the composition of {conf_dir}; "
                "run `python -m torchscan_stages.pipeline.compose`",
                file=sys.stderr,
            )
            return 1
        return 0
    if current != text:
        from ..report import atomic_write_text

        atomic_write_text(target, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
