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
from typing import Any

import torch
from torch import nn

from ..face import summary
from ..report import save_report
from ..targets import import_target
from ..zoo import small_resnet, tiny_transformer

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
    parser.add_argument("--max-depth", type=int, default=None)
    parser.add_argument("--mode", choices=("full", "structure"), default="full")
    return parser


def load_object(spec: str, option: str) -> Any:
    """``pkg.module:name`` -> the object; CommandError naming the import path on failure."""
    try:
        return import_target(spec)
    except ValueError as error:
        raise CommandError(f"{option} {spec!r}: {error}") from error


def _call(factory: Any, spec: str, option: str) -> Any:
    try:
        return factory()
    except Exception as error:
        raise CommandError(
            f"{option} {spec!r}: calling it raised {type(error).__name__}: {error}"
        ) from error


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
        model, inputs = _model_and_inputs(options)
    except CommandError as error:
        print(f"summary: {error}", file=sys.stderr)
        return 2
    report = summary(model, mode=options.mode, max_depth=options.max_depth, **inputs)
    path = save_report(report, options.json)
    print(f"report written to {path}")
    return 0
