"""Run a function right after a module is first imported, without importing it ourselves: for
hooks into packages (Dynamo, accelerate) that ``import torch`` must not pay for."""

from __future__ import annotations

import importlib.abc
import sys


def run_after_import(name: str, then) -> None:
    """``then(module)`` once ``name`` has been imported and executed (before modules importing it
    bind its names). Callers check ``sys.modules`` first; one pending hook per name."""
    if not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, then))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when ``name`` is imported, lets the other finders find it and runs
    ``then(module)`` once the module has executed."""

    def __init__(self, name: str, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = finder.find_spec(fullname, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _ThenLoader(spec.loader, self.then)
        return spec


class _ThenLoader(importlib.abc.Loader):
    def __init__(self, loader, then):
        self.loader, self.then = loader, then

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.then(module)

    def __getattr__(self, name):  # get_code, get_source, ... for tracebacks and inspect
        return getattr(self.loader, name)
