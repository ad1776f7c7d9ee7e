"""House rules a reviewer would otherwise check by hand (docs/architecture.md)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "torchscan_stages"
MAX_FUNCTION_LINES = 80  # def line to last line, signature and docstring included
MAX_MODULE_LINES = 600
# Over the limits while another branch works on them; each with its reason. An entry that
# is no longer over fails below, so the list cannot outlive what it excuses.
LONG_MODULES: dict[str, str] = {}  # "path" -> reason; none today
LONG_FUNCTIONS: dict[str, str] = {}  # "path:name" -> reason; none today


@functools.cache
def _modules() -> list[tuple[str, str]]:
    return [
        (str(path.relative_to(PACKAGE.parent)), path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


@functools.cache
def _trees() -> list[tuple[str, ast.Module]]:
    """Every package module parsed once for all the rules here (parsing is the cost)."""
    return [(name, ast.parse(text)) for name, text in _modules()]


@functools.cache
def _functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    return [
        (name, node)
        for name, tree in _trees()
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def _function_lines(tree: ast.Module) -> list[tuple[str, int, int]]:
    """(name, def line, lines from the def line to the function's last line)."""
    return [
        (node.name, node.lineno, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def test_no_function_in_the_package_is_longer_than_80_lines() -> None:
    long, excused = [], set()
    for name, tree in _trees():
        for function, line, lines in _function_lines(tree):
            key = f"{name}:{function}"
            if lines <= MAX_FUNCTION_LINES:
                continue
            if key in LONG_FUNCTIONS:
                excused.add(key)
            else:
                long.append(f"{name}:{line} {function} {lines}")
    assert not long, "split these at their natural seams:\n" + "\n".join(long)
    stale = sorted(set(LONG_FUNCTIONS) - excused)
    assert not stale, f"no longer over {MAX_FUNCTION_LINES} lines, drop the exception: {stale}"


def test_no_module_in_the_package_is_longer_than_600_lines() -> None:
    sizes = {name: len(text.splitlines()) for name, text in _modules()}
    long = [f"{name} {n}" for name, n in sizes.items() if n > MAX_MODULE_LINES]
    long = [entry for entry in long if entry.split()[0] not in LONG_MODULES]
    assert not long, "split these at the seams of their jobs:\n" + "\n".join(long)
    stale = sorted(name for name in LONG_MODULES if sizes.get(name, 0) <= MAX_MODULE_LINES)
    assert not stale, f"no longer over {MAX_MODULE_LINES} lines, drop the exception: {stale}"


def test_the_rule_counts_from_the_def_line_to_the_end() -> None:
    """The measure itself: signature and docstring count, decorators do not."""
    source = '@wrap\ndef f(\n    a,\n):\n    """Doc."""\n    return a\n'
    assert _function_lines(ast.parse(source)) == [("f", 2, 5)]  # lines 2-6


def _assigned_names(tree: ast.Module) -> list[str]:
    """Names bound at a module's top level by ``NAME = ...`` or ``NAME: T = ...``."""
    names = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names += [target.id for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return names


def test_the_workload_alias_is_defined_once() -> None:
    definitions = [name for name, tree in _trees() if "Workload" in _assigned_names(tree)]
    assert definitions == ["torchscan_stages/workloads.py"]


def test_resolve_device_is_defined_once() -> None:
    definitions = _function_definitions("resolve_device")
    assert [d.split(":")[0] for d in definitions] == ["torchscan_stages/devices.py"]


def _function_definitions(name: str) -> list[str]:
    return [f"{path}:{node.lineno}" for path, node in _functions() if node.name == name]


def test_each_shared_helper_is_defined_once() -> None:
    """One concept, one helper: the others were folded into these."""
    homes = {
        "first_tensor": "torchscan_stages/analysis/call_values.py",
        "arg": "torchscan_stages/analysis/call_values.py",
        "tensor_sums": "torchscan_stages/analysis/call_values.py",
        "report_of_kind": "torchscan_stages/report/load.py",
        "formula": "torchscan_stages/analysis/operator_formulas/_registry.py",
        "register_formula": "torchscan_stages/analysis/operator_formulas/_registry.py",
    }
    found = {name: [d.split(":")[0] for d in _function_definitions(name)] for name in homes}
    assert found == {name: [home] for name, home in homes.items()}
    # folded in: the parameter sums left in _common (param_numel, subtree_param_numel) are
    # one-line projections of tensor_sums, for the formula families that call them
    gone = ("_first_tensor", "_first_shallow_tensor", "_tensor_sums")
    assert [d for name in gone for d in _function_definitions(name)] == []


def test_no_two_test_modules_share_a_basename() -> None:
    """pytest's default (prepend) import mode names a test module by its basename: two files
    called test_x.py in different folders stop collection of the whole suite in one process
    (it happened once: tests/predict/ and tests/integrations/ each had test_hf_families.py)."""
    tests = Path(__file__).resolve().parent
    seen: dict[str, list[str]] = {}
    for path in sorted(tests.rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(tests)))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"
