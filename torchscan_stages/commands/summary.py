"""``python -m torchscan_stages summary``: the cost table of a model + its JSON report.

``--model`` is a built-in name (``cnn``, ``transformer``) or an import path
``pkg.module:factory`` (or ``pkg.module.factory``, as in a pipeline config's ``_target_``;
one resolver, :mod:`torchscan_stages.targets`) to a zero-argument callable returning an
``nn.Module`` (your own model). Its inputs come from ``--input pkg.module:factory`` (a
zero-argument callable returning a tensor, a tuple of positional arguments or a dict of
keyword arguments) or ``--input-shape 3,32,32`` (generated, batch of 1 added).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..report import check_output_path, save_report
from ..targets import import_target

if TYPE_CHECKING:
    from torch import nn

# torch, the face and the zoo are imported once the arguments parsed: `--help` and a bad
# option answer without loading torch (seconds on a busy machine)

BUILT_IN = ("cnn", "transformer")


class CommandError(Exception):
    """A bad command-line value; its message names the option and the value."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m torchscan_stages summary",
        description="Print the module cost table of a model (an embedded one, or yours by "
        "import path) and write its AnalysisReport as JSON (atomically).",
    )
    parser.add_argument(
        "--model",
        default="cnn",
        help="'cnn', 'transformer', or pkg.module:factory (a callable returning an nn.Module)",
    )
    parser.add_argument(
        "--input",
        default=None,
        help="pkg.module:factory returning a tensor, a tuple of arguments or a dict of kwargs",
    )
    parser.add_argument("--input-shape", default=None, help="e.g. 3,32,32 (batch excluded)")
    parser.add_argument("--json", default="reports/summary.json", help="report path")
    parser.add_argument(
        "--max-depth",
        type=int,
        default=None,
        help="print rows down to this module depth (0: the model only; default: every row); "
        "the JSON report keeps every layer",
    )
    parser.add_argument("--mode", choices=("full", "structure"), default="full")
    return parser


def load_object(spec: str, option: str) -> Any:
    """``pkg.module:name`` -> the object; CommandError naming the import path on failure."""
    try:
        return import_target(spec)
    except ValueError as error:
        raise CommandError(f"{option} {spec!r}: {error}") from error


def _call(factory: Any, spec: str, option: str) -> Any:
    """``factory()``; any exception it raises (also ``SystemExit``, as ``builtins:exit``
    raises) becomes one line naming the factory and its (empty) arguments."""
    try:
        return factory()
    except (Exception, SystemExit) as error:
        raise CommandError(
            f"{option} {spec!r}: calling it raised {type(error).__name__}: "
            f"{_first_line(error)} (called as {spec}() with no arguments)"
        ) from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else repr(error)


def _shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise CommandError(f"--input-shape {text!r}: expected integers such as 3,32,32") from None
    if not dims or any(d < 0 for d in dims):
        raise CommandError(f"--input-shape {text!r}: expected non-negative integers")
    return dims


def _inputs(options: argparse.Namespace) -> dict[str, Any]:
    """summary() keyword arguments for the model's inputs."""
    if options.input is not None and options.input_shape is not None:
        raise CommandError("give --input or --input-shape, not both")
    if options.input_shape is not None:
        return {"input_shape": _shape(options.input_shape)}
    if options.input is None:
        raise CommandError(
            f"--model {options.model!r} needs its inputs: --input pkg.module:factory or "
            "--input-shape 3,32,32"
        )
    import torch

    value = _call(load_object(options.input, "--input"), options.input, "--input")
    if isinstance(value, Mapping):
        return {"kwargs": dict(value)}
    if isinstance(value, torch.Tensor):
        return {"args": (value,)}
    if isinstance(value, (tuple, list)):
        return {"args": tuple(value)}
    raise CommandError(
        f"--input {options.input!r} returned {type(value).__name__}; expected a tensor, a tuple "
        "of positional arguments or a dict of keyword arguments"
    )


def _model_and_inputs(options: argparse.Namespace) -> tuple[nn.Module, dict[str, Any]]:
    import torch
    from torch import nn

    from ..zoo import small_resnet, tiny_transformer

    if options.model == "cnn":
        return small_resnet(), {"input_shape": (3, 32, 32)}
    if options.model == "transformer":
        return tiny_transformer(), {"args": (torch.zeros(1, 32, dtype=torch.long),)}
    if ":" not in options.model and "." not in options.model:
        raise CommandError(
            f"--model {options.model!r}: expected one of {', '.join(BUILT_IN)} or "
            "pkg.module:factory (or pkg.module.factory)"
        )
    model = _call(load_object(options.model, "--model"), options.model, "--model")
    if not isinstance(model, nn.Module):
        raise CommandError(
            f"--model {options.model!r} returned {type(model).__name__}, not a torch.nn.Module"
        )
    return model, _inputs(options)


def main(argv: list[str]) -> int:
    options = _parser().parse_args(argv)
    if options.max_depth is not None and options.max_depth < 0:
        print("--max-depth must be >= 0", file=sys.stderr)
        return 2
    try:
        check_output_path(options.json, [], example="summary.json")
        model, inputs = _model_and_inputs(options)
    except (CommandError, ValueError) as error:
        print(f"summary: {error}", file=sys.stderr)
        return 2
    from ..face import summary

    try:
        report = summary(model, mode=options.mode, max_depth=options.max_depth, **inputs)
    except Exception as error:  # the model's own failure on these inputs: one line, exit 1
        given = ", ".join(f"{key}={_shown(value)}" for key, value in inputs.items())
        print(
            f"summary: --model {options.model!r} failed on its inputs ({given}): "
            f"{type(error).__name__}: {_first_line(error)}",
            file=sys.stderr,
        )
        return 1
    try:
        path = save_report(report, options.json)
    except OSError as error:
        print(f"summary: cannot write --json {options.json}: {error.strerror or error}",
              file=sys.stderr)  # fmt: skip
        return 1
    print(f"report written to {path}")
    return 0


def _shown(value: Any) -> str:
    """Inputs as they were given: shapes for tensors, not their values."""
    import torch

    if isinstance(value, torch.Tensor):
        return f"tensor{tuple(value.shape)}"
    if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value):
        return "(" + ", ".join(_shown(item) for item in value) + ")"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_shown(v)}" for k, v in value.items()) + "}"
    return repr(value)
