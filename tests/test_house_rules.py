"""House rules a reviewer would otherwise check by hand (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "torchscan_stages"
MAX_BODY_LINES = 80


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the end of the function."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:] or body
    return (node.end_lineno or node.lineno) - body[0].lineno + 1


def test_no_function_in_the_package_is_longer_than_80_lines() -> None:
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = _body_lines(node)
                if lines > MAX_BODY_LINES:
                    long.append(
                        f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} {lines}"
                    )
    assert not long, "split these at their natural seams:\n" + "\n".join(long)


MAX_MODULE_LINES = 700


def test_no_module_in_the_package_is_longer_than_700_lines() -> None:
    long = [
        f"{path.relative_to(PACKAGE.parent)} {lines}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not long, "split these at the seams of their jobs:\n" + "\n".join(long)


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
    definitions = [
        str(path.relative_to(PACKAGE.parent))
        for path in sorted(PACKAGE.rglob("*.py"))
        if "Workload" in _assigned_names(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert definitions == ["torchscan_stages/workloads.py"]


def test_resolve_device_is_defined_once() -> None:
    definitions = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name == "resolve_device"
    ]
    assert [d.split(":")[0] for d in definitions] == ["torchscan_stages/devices.py"]


def _function_definitions(name: str) -> list[str]:
    return [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
    ]


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
