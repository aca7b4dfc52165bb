"""nki's modules import each other in one direction: no import cycle, no first-party import
hidden inside a function to break one, and nothing above nki (torch-neuronx) imported at all."""

from __future__ import annotations

import ast
import pathlib

import nki

ROOT = pathlib.Path(nki.__file__).parent
FIRST_PARTY = ("nki", "neuron_sim", "neuronxcc", "torch_neuronx", "nkilib")


def _module_name(path: pathlib.Path) -> str:
    parts = ("nki",) + path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_package(path: pathlib.Path) -> bool:
    return path.name == "__init__.py"


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(path: pathlib.Path) -> list[tuple[str, ast.AST, bool]]:
    """(imported module, node, at module level) for every import in ``path``."""
    module, package = _module_name(path), _is_package(path)
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, package, node)
            for alias in node.names:  # ``from . import tracing`` imports the module nki.tracing
                candidate = f"{target}.{alias.name}"
                found.append((candidate if _exists(candidate) else target, node, id(node) in top))
    return found


def _exists(module: str) -> bool:
    if not module.startswith("nki"):
        return False
    rel = pathlib.Path(*module.split(".")[1:])
    return (ROOT / rel).with_suffix(".py").exists() or (ROOT / rel / "__init__.py").exists()


SOURCES = sorted(ROOT.rglob("*.py"))


def test_no_first_party_import_inside_a_function():
    hidden = [f"{p.relative_to(ROOT)}:{node.lineno} imports {name}"
              for p in SOURCES for name, node, top in _imports(p)
              if not top and name.split(".")[0] in FIRST_PARTY]
    assert not hidden, hidden


def test_nki_does_not_import_torch_or_torch_neuronx():
    # nki.compat runs other people's kernel tests; it imports torch (optionally) only to log the
    # comparisons of units that use torch themselves.
    found = [f"{p.relative_to(ROOT)}:{node.lineno} imports {name}"
             for p in SOURCES if p.relative_to(ROOT).parts[0] != "compat"
             for name, node, _ in _imports(p) if name.split(".")[0] in ("torch", "torch_neuronx")]
    assert not found, found


def test_modules_import_each_other_without_cycles():
    graph = {_module_name(p): {n for n, _, top in _imports(p) if top and n.split(".")[0] == "nki" and n != _module_name(p)}
             for p in SOURCES}
    # A submodule's ``from . import x`` (or ``from .. import x``) runs the package's __init__ first,
    # which is not a dependency of the submodule on everything the package exports: only edges
    # between modules count, package __init__ files included as modules of their own.
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for dep in sorted(graph.get(m, ())):
            if state.get(dep) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(dep):] + [dep]))
            if dep not in state:
                visit(dep)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
