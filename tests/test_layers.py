"""The layer rules of docs/architecture.md, read off the package's imports with ``ast``.

Every import counts: module level, function-local, and ``importlib.import_module("...")``
with a literal (or literal-prefixed f-string) name, plus the face's lazy-loader table
(``_PUBLIC`` in ``torchscan_stages/__init__.py``). Imports under ``if TYPE_CHECKING:`` count
too, in every rule and in the circle check: a circle that only type hints close is still two
modules that cannot be read, tested or moved apart.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "torchscan_stages"
ROOT = "torchscan_stages"

# the ground floor: imports nothing above it
GROUND = frozenset(
    {
        "report",
        "provenance",
        "devices",
        "targets",
        "workloads",
        "stats",
        "settings",
        "_gc",
        "_signals",
        "_version",
    }
)
FACE = frozenset({"__init__", "__main__", "face", "commands", "pipeline", "stages", "history"})
# the library floor: each imports the ground and the parts its row names, never the face
LIBRARY = frozenset({"analysis", "measure", "render", "predict", "compare", "serve", "zoo"})
# top-level part -> the other top-level parts it may import (ground parts may import each other);
# every part has its row, the top floors too: a new part fails until it is given one
ALLOWED: dict[str, frozenset[str]] = {
    **{part: GROUND for part in GROUND},
    "analysis": GROUND,  # neither measure nor render
    "measure": GROUND,  # never renders, never analyses
    "render": GROUND,  # only consumes reports
    "predict": GROUND | {"analysis", "measure"},
    "compare": GROUND | {"analysis", "measure"},
    # served inference: drives workloads (measure), counts and predicts generation; never renders
    "serve": GROUND | {"analysis", "measure", "predict"},
    "integrations": GROUND | {"analysis"},
    "zoo": GROUND | {"analysis"},  # embedded models register their handlers
    # the top floors: the public face, the CLI, history, the pipeline and its stages
    "__init__": GROUND | LIBRARY | {"face"},  # the lazy loader's table of public names
    "__main__": GROUND | {"commands"},
    "face": GROUND | LIBRARY,  # summary() and measure_workload(): a library call, then text
    "history": GROUND | LIBRARY,  # reads committed metrics; its page is drawn by render
    "commands": GROUND | LIBRARY | {"face", "history"},
    "pipeline": GROUND | LIBRARY,
    "stages": GROUND | LIBRARY | {"pipeline"},
}
# the one sanctioned plug-in load: HF handlers, loaded by importlib the first time a crawl
# meets a transformers class (the model's owner has already imported transformers)
PLUGIN_LOADS = frozenset(
    {("torchscan_stages.analysis.hf_registration", "torchscan_stages.integrations.hf_handlers")}
)


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    line: int
    names: tuple[str, ...]


def read_package(root: Path = PACKAGE) -> dict[str, str]:
    """Dotted module name -> source, for every module of the package (packages as ``a.b``)."""
    sources = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts[-1] = "__init__"  # kept, so relative imports know it is a package
        sources[".".join(parts)] = path.read_text(encoding="utf-8")
    return sources


def _module_of(name: str) -> str:
    return name.removesuffix(".__init__")


def _absolute(importer: str, level: int, module: str | None) -> str:
    base = importer.split(".")[:-level]
    return ".".join(base + ([module] if module else []))


def _literal_prefix(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value.rstrip(".")
    return None


def _is_lazy_table(importer: str, node: ast.Assign) -> bool:
    """The face's ``_PUBLIC`` table: public name -> the module its lazy loader imports."""
    return importer == f"{ROOT}.__init__" and any(
        isinstance(t, ast.Name) and t.id == "_PUBLIC" for t in node.targets
    )


def _raw_imports(importer: str, tree: ast.Module) -> list[tuple[str, tuple[str, ...], int]]:
    found: list[tuple[str, tuple[str, ...], int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _absolute(importer, node.level, node.module) if node.level else node.module
            names = tuple(alias.name for alias in node.names)
            found.append((target or "", names, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(alias.name, (), node.lineno) for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
        ):
            name = _literal_prefix(node.args[0])
            if name is not None and name.startswith("."):
                name = _absolute(importer, 1, name.lstrip("."))
            if name:
                found.append((name, (), node.lineno))
        elif isinstance(node, ast.Assign) and _is_lazy_table(importer, node):
            for value in getattr(node.value, "values", []):
                name = _literal_prefix(value)
                if name:
                    found.append((_absolute(importer, 1, name.lstrip(".")), (), node.lineno))
    return found


def import_edges(sources: dict[str, str]) -> list[Edge]:
    """Every import from a package module to another package module (names resolved)."""
    modules = {_module_of(name) for name in sources}
    edges = []
    for importer, text in sources.items():
        for target, names, line in _raw_imports(importer, ast.parse(text)):
            if not target.startswith(ROOT):
                continue
            resolved = {f"{target}.{n}" for n in names if f"{target}.{n}" in modules} or {target}
            for name in sorted(resolved):
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != _module_of(importer):
                    edges.append(Edge(_module_of(importer), name, line, names))
    return edges


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def arrow_violations(edges: list[Edge]) -> set[tuple[str, str]]:
    """(importer, imported) pairs that break a layer rule."""
    bad = set()
    for edge in edges:
        source, target = _part(edge.importer), _part(edge.imported)
        if source == target or (edge.importer, edge.imported) in PLUGIN_LOADS:
            continue
        upward = source in FACE - {"__init__", "__main__"} and target in {"__init__", "__main__"}
        below = target not in ALLOWED.get(source, frozenset())
        if target == "integrations" or below or upward:
            bad.add((edge.importer, edge.imported))
    return bad


def private_crossings(edges: list[Edge]) -> list[str]:
    """``_name`` imported from another top-level part of the package."""
    return [
        f"{e.importer}:{e.line} takes {n} from {e.imported}"
        for e in edges
        if _part(e.importer) != _part(e.imported)
        for n in e.names
        if n.startswith("_") and not n.startswith("__")
    ]


def circles(edges: list[Edge]) -> list[list[str]]:
    """Strongly connected groups of two or more modules (Tarjan), type-hint imports included."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.importer, set()).add(e.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_forbidden_arrow_between_layers() -> None:
    bad = arrow_violations(import_edges(read_package()))
    assert sorted(bad) == []


def test_every_top_level_part_has_its_row() -> None:
    parts = {_part(_module_of(name)) for name in read_package()}
    assert sorted(parts - set(ALLOWED)) == []


def test_no_import_circle() -> None:
    assert circles(import_edges(read_package())) == []


def test_no_private_name_crosses_packages() -> None:
    assert private_crossings(import_edges(read_package())) == []


def test_the_plugin_load_is_seen_and_is_the_only_import_of_integrations() -> None:
    edges = import_edges(read_package())
    into = {(e.importer, e.imported) for e in edges if _part(e.imported) == "integrations"}
    outside = {pair for pair in into if _part(pair[0]) != "integrations"}
    assert outside == PLUGIN_LOADS  # found through importlib.import_module("...")


def test_the_checker_fails_on_planted_imports() -> None:
    """Each rule on a real copy of the package plus one planted module or line."""
    sources = read_package()
    planted = {
        **sources,
        f"{ROOT}.analysis.planted": "from ..render.text import compact_number\n",
        f"{ROOT}.stats": sources[f"{ROOT}.stats"]
        + "\ndef late():\n    import importlib\n"
        + "    importlib.import_module('torchscan_stages.pipeline.runner')\n",
        f"{ROOT}.measure.planted": "def f():\n    from ..report.io import _decode\n",
        f"{ROOT}.render.planted_a": "from .planted_b import x\n",
        f"{ROOT}.render.planted_b": "def g():\n    from . import planted_a\n",
        # a circle closed only by a type hint is a circle too
        f"{ROOT}.measure.planted_c": "from .planted_d import y\n",
        f"{ROOT}.measure.planted_d": "from typing import TYPE_CHECKING\n"
        + "if TYPE_CHECKING:\n    from .planted_c import z\n",
        f"{ROOT}.compare.planted": "import torchscan_stages.integrations.hf_models\n",
        # a top floor has its own row too: history never runs pipeline stages
        f"{ROOT}.history.planted": "from ..stages import crawl\n",
    }
    edges = import_edges(planted)
    bad = arrow_violations(edges)
    assert bad == {
        (f"{ROOT}.analysis.planted", f"{ROOT}.render.text"),
        (f"{ROOT}.stats", f"{ROOT}.pipeline.runner"),
        (f"{ROOT}.compare.planted", f"{ROOT}.integrations.hf_models"),
        (f"{ROOT}.history.planted", f"{ROOT}.stages.crawl"),
    }
    assert private_crossings(edges) == [
        f"{ROOT}.measure.planted:2 takes _decode from {ROOT}.report.io"
    ]
    assert circles(edges) == [
        [f"{ROOT}.measure.planted_c", f"{ROOT}.measure.planted_d"],
        [f"{ROOT}.render.planted_a", f"{ROOT}.render.planted_b"],
    ]
