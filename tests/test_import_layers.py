"""The import graph of the monorepo's packages follows their layering.

* Packages depend downward only: neuron_sim < nki < neuronxcc < neuron_explorer < torch_neuronx < vllm_neuron.
* Inside torch_neuronx, layers depend downward only (``TORCH_NEURONX_LAYERS``): the device layer
  imports nothing above it, the execution API only the device layer, and so on.
* No package imports another package's underscore names (its private modules or names).
* No first-party import hides inside a function: every dependency is visible at the top of its
  module. Optional third-party imports (torch-mlir, dynamo) may stay lazy.
* No import cycles among a package's modules.

The sources are read as text (``ast``), so the test sees what the code says, whatever is installed.
Packages whose own cleanup is still under way are listed in ``NOT_YET_CHECKED``.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_ORDER = ["neuron_sim", "nki", "neuronxcc", "neuron_explorer", "torch_neuronx", "vllm_neuron"]
SOURCES = {
    "neuron_sim": ROOT / "packages/neuron-sim/src/neuron_sim",
    "nki": ROOT / "packages/nki/src/nki",
    "neuronxcc": ROOT / "packages/neuronx-cc/src/neuronxcc",
    "neuron_explorer": ROOT / "packages/neuron-explorer/src/neuron_explorer",
    "torch_neuronx": ROOT / "packages/torch-neuronx/src/torch_neuronx",
    "vllm_neuron": ROOT / "packages/vllm-neuron/src/vllm_neuron",
}
# Layers of torch_neuronx, lowest first: a module may import modules of its own layer or below.
TORCH_NEURONX_LAYERS = [
    ("device", ["torch_neuronx._C", "torch_neuronx.device"]),  # registration, bridge, torch.neuron, streams, memory, RNG, autocast
    ("execution", ["torch_neuronx.execution"]),  # the one launch / submit API
    ("ops", ["torch_neuronx.ops"]),  # op facts, tracking, transfers, CPU fallback
    ("compiled", ["torch_neuronx.compiled"]),  # per-op NEFFs, in-place plan, adaptive eager, the boxed kernel
    ("kernels", ["torch_neuronx.kernels"]),  # explicit PrivateUse1 kernels and their registration
    ("frontends", ["torch_neuronx.dynamo", "torch_neuronx.nki_integration", "torch_neuronx.nki_op", "torch_neuronx.integrations",
                   "torch_neuronx.nki_fast_form", "torch_neuronx.profiling",
                   "torch_neuronx.distributed"]),  # torch.compile, NKI kernels, the profiler, torch.distributed
    ("package", ["torch_neuronx", "torch_neuronx.testing"]),  # the public package
]
# Packages whose cycles and lazy imports other streams are removing; checked once they land.
NOT_YET_CHECKED: set[str] = set()
FIRST_PARTY = set(PACKAGE_ORDER)
EXTENSION_MODULES = {"torch_neuronx._C"}  # built from C++ (csrc/), imported like a module


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module (or the module a name is imported from)
    names: tuple[str, ...]  # names imported from ``target`` (``from target import a, b``)
    line: int
    in_function: bool


def _module_name(package: str, path: Path) -> str:
    rel = path.relative_to(SOURCES[package]).with_suffix("")
    parts = [package, *rel.parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package, root in SOURCES.items():
        if not root.is_dir():
            continue  # a package this checkout does not have yet
        for folder, _, files in os.walk(root):
            for name in files:
                if name.endswith(".py"):
                    path = Path(folder) / name
                    found[_module_name(package, path)] = path
    return found


MODULES = _modules()


def _is_package(module: str) -> bool:
    return MODULES.get(module, Path()).name == "__init__.py"


def _resolve(module: str, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = module.split(".") if _is_package(module) else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str):
        self.module = module
        self.depth = 0
        self.imports: list[Import] = []

    def _function(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Import(self, node):
        for alias in node.names:
            self.imports.append(Import(self.module, alias.name, (), node.lineno, self.depth > 0))

    def visit_ImportFrom(self, node):
        target = _resolve(self.module, node.level, node.module)
        names = tuple(a.name for a in node.names)
        # ``from pkg import submodule`` imports the submodule: one edge per submodule named.
        submodules = [n for n in names if f"{target}.{n}" in MODULES or f"{target}.{n}" in EXTENSION_MODULES]
        for n in submodules:
            self.imports.append(Import(self.module, f"{target}.{n}", (), node.lineno, self.depth > 0))
        rest = tuple(n for n in names if n not in submodules)
        if rest or not submodules:
            self.imports.append(Import(self.module, target, rest, node.lineno, self.depth > 0))


def _imports() -> list[Import]:
    found = []
    for module, path in MODULES.items():
        collector = _Collector(module)
        collector.visit(ast.parse(path.read_text(), str(path)))
        found.extend(collector.imports)
    return found


IMPORTS = _imports()


def _package(name: str) -> str | None:
    top = name.split(".")[0]
    return top if top in FIRST_PARTY else None


def _checked(imp: Import) -> bool:
    return _package(imp.module) not in NOT_YET_CHECKED


def _where(imp: Import) -> str:
    return f"{imp.module}:{imp.line}"


def _layer(module: str) -> tuple[int, str]:
    best = None
    for rank, (name, prefixes) in enumerate(TORCH_NEURONX_LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[2]:
                    best = (rank, name, len(prefix))
    assert best is not None, f"{module} belongs to no layer of TORCH_NEURONX_LAYERS: add it there"
    return best[0], best[1]


def test_every_torch_neuronx_module_has_a_layer():
    for module in MODULES:
        if module.startswith("torch_neuronx"):
            _layer(module)


def test_packages_import_downward_only():
    bad = []
    for imp in IMPORTS:
        mine, theirs = _package(imp.module), _package(imp.target)
        if _checked(imp) and theirs is not None and PACKAGE_ORDER.index(theirs) > PACKAGE_ORDER.index(mine):
            bad.append(f"{_where(imp)} imports {imp.target} (package order: {' < '.join(PACKAGE_ORDER)})")
    assert not bad, "\n".join(bad)


def test_torch_neuronx_layers_import_downward_only():
    bad = []
    for imp in IMPORTS:
        if not imp.module.startswith("torch_neuronx") or _package(imp.target) != "torch_neuronx":
            continue
        (mine, my_name), (theirs, their_name) = _layer(imp.module), _layer(imp.target)
        if theirs > mine:
            bad.append(f"{_where(imp)} ({my_name} layer) imports {imp.target} ({their_name} layer)")
    order = " < ".join(name for name, _ in TORCH_NEURONX_LAYERS)
    assert not bad, f"layer order: {order}\n" + "\n".join(bad)


def test_no_package_imports_another_packages_private_names():
    bad = []
    for imp in IMPORTS:
        mine, theirs = _package(imp.module), _package(imp.target)
        if not _checked(imp) or theirs is None or theirs == mine:
            continue
        private = [part for part in imp.target.split(".") if part.startswith("_") and not part.startswith("__")]
        private += [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
        if private:
            bad.append(f"{_where(imp)} imports private {private} of {imp.target}")
    assert not bad, "\n".join(bad)


def test_no_first_party_import_inside_a_function():
    bad = [f"{_where(imp)} imports {imp.target} inside a function" for imp in IMPORTS
           if _checked(imp) and imp.in_function and _package(imp.target) is not None]
    assert not bad, "move these imports to the top of their modules:\n" + "\n".join(bad)


def _cycles(package: str, imports: list[Import] = IMPORTS, modules=MODULES) -> list[list[str]]:
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if imp.in_function or _package(imp.module) != package or _package(imp.target) != package:
            continue
        target = imp.target
        while target not in modules and target not in EXTENSION_MODULES and "." in target:  # ``import a.b.c`` of a non-module name
            target = target.rsplit(".", 1)[0]
        # Importing ``a.b.c`` first runs ``a/b/__init__.py``: from outside ``a.b`` that is an edge too
        # (a package whose __init__ imports its modules closes a cycle through any of them).
        parts = target.split(".")
        for depth in range(1, len(parts) + 1):
            step = ".".join(parts[:depth])
            known = step in modules or step in EXTENSION_MODULES
            if known and step != imp.module and not imp.module.startswith(step + "."):
                graph.setdefault(imp.module, set()).add(step)
    # Tarjan's strongly connected components: every component of more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


@pytest.mark.parametrize("package", [p for p in PACKAGE_ORDER if p not in NOT_YET_CHECKED])
def test_no_import_cycles(package):
    cycles = _cycles(package)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_checker_sees_a_violation():
    """The collector resolves relative imports and marks function-level ones (so the rules above
    can fail): a module of the device layer importing upward, inside a function."""
    source = "from ..compiled import dispatch\n\ndef f():\n    from ..kernels import registration\n"
    collector = _Collector("torch_neuronx.device.bridge")
    collector.visit(ast.parse(source))
    got = {(imp.target, imp.in_function) for imp in collector.imports}
    assert got == {("torch_neuronx.compiled.dispatch", False), ("torch_neuronx.kernels.registration", True)}
    assert _layer("torch_neuronx.device.bridge")[0] < _layer("torch_neuronx.compiled.dispatch")[0]


def test_the_checker_sees_a_cycle_through_a_package_init():
    """``pkg.a`` imports ``pkg.sub.tables``, which runs ``pkg/sub/__init__.py`` first; that imports
    ``pkg.sub.user``, which imports ``pkg.a``: a cycle although no module names ``pkg.sub`` itself."""
    modules = {m: Path(f"{m}.py") for m in ("neuronxcc.a", "neuronxcc.sub", "neuronxcc.sub.tables", "neuronxcc.sub.user")}
    edges = [("neuronxcc.a", "neuronxcc.sub.tables"), ("neuronxcc.sub", "neuronxcc.sub.user"),
             ("neuronxcc.sub.user", "neuronxcc.a"), ("neuronxcc.sub.user", "neuronxcc.sub.tables")]
    imports = [Import(module, target, (), 1, False) for module, target in edges]
    assert _cycles("neuronxcc", imports, modules) == [["neuronxcc.a", "neuronxcc.sub", "neuronxcc.sub.user"]]
    assert _cycles("neuronxcc", imports[:1] + imports[2:], modules) == []  # an __init__ that imports nothing
