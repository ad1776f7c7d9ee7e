"""Regenerate params.yaml from conf/ (what ``dvc exp run`` does with Hydra enabled).

python -m torchscan_stages.pipeline.compose            # write params.yaml
python -m torchscan_stages.pipeline.compose --check    # exit 1 when params.yaml drifted
python -m torchscan_stages.pipeline.compose --set-default model=gpt2 input=hf_tokens
python -m torchscan_stages.pipeline.compose model=transformer --output /tmp/preview.yaml

params.yaml is always the composition of conf/ as it stands, so the drift check stays
green: switching the default model is an edit of ``conf/config.yaml``'s defaults list
(``--set-default`` makes it, keeping comments), never a one-off override in params.yaml.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from .loader import CONFIG_NAME, PARAMS_FILE, compose_yaml, find_conf_dir
from .schema import ConfigError


def set_defaults(conf_dir: Path, choices: list[str]) -> None:
    """Rewrite ``- GROUP: OPTION`` lines of conf/config.yaml's defaults list in place."""
    path = conf_dir / f"{CONFIG_NAME}.yaml"
    text = path.read_text(encoding="utf-8")
    for choice in choices:
        group, sep, option = choice.partition("=")
        if not sep or not group or not option or "." in group:
            raise ConfigError(f"--set-default {choice!r}: expected GROUP=OPTION, e.g. model=gpt2")
        if not (conf_dir / group / f"{option}.yaml").exists():
            raise ConfigError(
                f"--set-default {choice!r}: no {conf_dir / group / option}.yaml; "
                f"write it first (see docs/pipeline.md)"
            )
        line = re.compile(rf"^(\s*-\s*{re.escape(group)}\s*:\s*)(\S+)(.*)$", re.M)
        if line.search(text) is None:
            raise ConfigError(f"--set-default {choice!r}: {path} has no '- {group}: ...' default")
        match = line.search(text)
        assert match is not None
        text = f"{text[: match.start(2)]}{option}{text[match.end(2) :]}"
    from ..report import atomic_write_text

    atomic_write_text(path, text)


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        found: dict[str, Any] = {}
        for key, value in node.items():
            found.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
        return found
    return {prefix: node}


def drifted_keys(current: str | None, composed: str) -> list[tuple[str, Any, Any]]:
    """(key, conf/'s value, params.yaml's value) for every key that differs."""
    import yaml

    try:
        mine = _flat(yaml.safe_load(current or "") or {})
    except yaml.YAMLError:
        return []
    theirs = _flat(yaml.safe_load(composed) or {})
    missing = object()
    keys = sorted(set(mine) | set(theirs))
    return [
        (key, theirs.get(key, "(absent)"), mine.get(key, "(absent)"))
        for key in keys
        if mine.get(key, missing) != theirs.get(key, missing)
    ]


def drift_message(target: Path, conf_dir: Path, current: str | None, composed: str) -> str:
    """Which keys drifted, and the two honest ways out: keep them in conf/, or drop them.

    ``dvc exp run -S key=value`` in the workspace (and ``dvc exp apply``) leave their
    overrides in params.yaml; plainly recomposing would silently revert them.
    """
    # a group choice changes many keys: its `name` says which option, so it comes first
    drift = sorted(drifted_keys(current, composed), key=lambda d: not d[0].endswith(".name"))
    shown = ", ".join(f"{k} (conf/: {a!r}, {target.name}: {b!r})" for k, a, b in drift[:5])
    more = f" and {len(drift) - 5} more" if len(drift) > 5 else ""
    where = f" at {shown}{more}" if drift else ""
    return (
        f"compose: {target} differs from the composition of {conf_dir}{where}. "
        "A workspace `dvc exp run -S KEY=VALUE` or `dvc exp apply` leaves its overrides "
        "there. To keep them, put them in conf/ (`python -m torchscan_stages.pipeline."
        "compose --set-default GROUP=OPTION` for a group choice, an edit of "
        f"{conf_dir / (CONFIG_NAME + '.yaml')} for a key), then run `python -m "
        "torchscan_stages.pipeline.compose`; to drop them, run that command alone (it "
        "rewrites params.yaml from conf/, reverting those keys). Experiments that leave the "
        "workspace alone: `dvc exp run --queue -S ...` or `--temp`."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchscan_stages.pipeline.compose")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides (needs --output)")
    parser.add_argument("--check", action="store_true", help="only report drift (exit 1)")
    parser.add_argument("--output", default=None, help=f"default: <repo>/{PARAMS_FILE}")
    parser.add_argument(
        "--set-default",
        nargs="+",
        metavar="GROUP=OPTION",
        default=[],
        help="switch conf/config.yaml's default (e.g. model=gpt2), then write params.yaml",
    )
    args = parser.parse_args(argv)
    try:
        conf_dir = find_conf_dir()
        if args.overrides and args.output is None:
            raise ConfigError(
                f"overrides {args.overrides} would make params.yaml differ from conf/ (the "
                "drift check fails); to switch the default use --set-default GROUP=OPTION, "
                "to preview a composition use --output FILE"
            )
        if args.set_default:
            set_defaults(conf_dir, args.set_default)
        text = compose_yaml(args.overrides, conf_dir=conf_dir)
    except ConfigError as error:
        print(f"compose: {error}", file=sys.stderr)
        return 2
    target = Path(args.output) if args.output else conf_dir.parent / PARAMS_FILE
    current = target.read_text(encoding="utf-8") if target.exists() else None
    if args.check:
        if current != text:
            print(drift_message(target, conf_dir, current, text), file=sys.stderr)
            return 1
        return 0
    if current != text:
        from ..report import atomic_write_text

        atomic_write_text(target, text)
    print(f"compose: {target} {'updated' if current != text else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
