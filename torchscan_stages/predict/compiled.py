"""A step that runs ``torch.compile``d code is predicted as the eager step, and says so.

The fake run executes compiled functions and modules eagerly (``set_stance("force_eager")``,
``workloads.eager_compiled_code``): inductor's fused kernels never pass through operator
dispatch, so the figure is the eager step's. The compiled step's real peak differs, either
way: issue 37 measured the compiled step's peak (the profiler's allocator peak, CPU) at
0.879x the eager peak on a decoder and 1.085x on a CNN. So where the step reaches compiled
code, or compiles during the run, the result is not ``complete`` (``compiled_as_eager``,
which makes every figure partial) and the diagnostic names what was compiled: a figure a
user acts on is never the eager one labelled as the compiled one.

Found before the run: the workload itself compiled, ``OptimizedModule``s
(``torch.compile(module)``) and modules compiled in place (``module.compile()``) among what
it reaches, compiled functions in its closure, defaults and globals (and theirs, two levels
down). Found during the run: calls to ``torch.compile`` and ``Module.compile``.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..report import Diagnostic
from .resident import Reached

_DEPTH = 3


def _name(obj: Any) -> str:
    if isinstance(obj, torch.nn.Module):
        return f"compiled module {type(getattr(obj, '_orig_mod', obj)).__name__}"
    original = getattr(obj, "_torchdynamo_orig_callable", None)
    if original is not None:
        return f"compiled function {getattr(original, '__qualname__', repr(original))}"
    return f"compiled module {type(getattr(obj, '_orig_mod', obj)).__name__}"


def _compiled(obj: Any) -> bool:
    if getattr(obj, "_torchdynamo_orig_callable", None) is not None:
        return True
    if isinstance(obj, torch.nn.Module):
        return type(obj).__name__ == "OptimizedModule" or any(
            getattr(sub, "_compiled_call_impl", None) is not None for sub in obj.modules()
        )
    return False


def _refs(function: Any) -> list[Any]:
    if not isinstance(function, types.FunctionType):
        return []
    found = [c.cell_contents for c in function.__closure__ or () if _filled(c)]
    found += list(function.__defaults__ or ())
    names = function.__code__.co_names
    found += [function.__globals__[n] for n in names if n in function.__globals__]
    return found


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises ValueError
    except ValueError:
        return False
    return True


def compiled_in(workload: Callable[[], Any], reached: Reached) -> list[str]:
    """What compiled code the workload reaches, by name (empty: none)."""
    found: list[str] = []
    seen: set[int] = set()
    frontier: list[tuple[Any, int]] = [(workload, 0)] + [(m, 0) for m in reached.modules]
    while frontier:
        obj, depth = frontier.pop()
        if id(obj) in seen or isinstance(obj, (types.ModuleType, type)):
            continue
        seen.add(id(obj))
        if _compiled(obj):
            found.append(_name(obj))
            continue
        if depth < _DEPTH:
            frontier += [(ref, depth + 1) for ref in _refs(obj)]
    return sorted(set(found))


@contextlib.contextmanager
def compile_calls() -> Iterator[list[str]]:
    """While entered: calls to ``torch.compile`` and ``Module.compile`` are recorded (they
    still compile: the fake run then runs the result eagerly)."""
    calls: list[str] = []
    original, method = torch.compile, torch.nn.Module.compile

    def compile(model: Any = None, *args: Any, **kwargs: Any) -> Any:
        calls.append("torch.compile() called in the step")
        return original(model, *args, **kwargs) if model is not None else original(*args, **kwargs)

    def compile_method(self: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        calls.append(f"{type(self).__name__}.compile() called in the step")
        method(self, *args, **kwargs)

    torch.compile = compile  # type: ignore[assignment]
    torch.nn.Module.compile = compile_method  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        torch.compile = original
        torch.nn.Module.compile = method  # type: ignore[method-assign]


def compiled_diagnostic(found: list[str]) -> list[Diagnostic]:
    """The warning that makes a compiled step's figures partial (none when nothing compiled)."""
    if not found:
        return []
    return [
        Diagnostic(
            code="compiled_as_eager",
            severity="warning",
            metric="peak",
            count=len(found),
            message=f"the step runs torch.compile'd code ({'; '.join(found[:4])}): this is "
            "the EAGER step's peak (the fake run executes compiled code eagerly), not the "
            "compiled graph's, whose fused kernels keep other intermediates (issue 37 measured "
            "0.879x on a decoder and 1.085x on a CNN of the eager peak). Not complete; measure "
            "the compiled step (measure_peak_memory) for its figure",
        )
    ]
