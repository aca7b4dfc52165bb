"""Other import names of the nki package: ``neuronxcc.nki.X`` (the legacy namespace) and
``nki_cpu_simulator.nki.X`` (NKI's CPU simulator package, which nki-library's test simulation mode
imports) are the modules ``nki.X`` themselves - one module object under several names."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys


class PackageAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``<prefix>.X`` as the module ``nki.X``."""

    def __init__(self, prefix: str):
        self.prefix = prefix + "."

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(self.prefix):
            return None
        try:
            target_spec = importlib.util.find_spec("nki." + fullname[len(self.prefix):])
        except ModuleNotFoundError:
            return None
        if target_spec is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=target_spec.submodule_search_locations is not None)

    def create_module(self, spec):
        return importlib.import_module("nki." + spec.name[len(self.prefix):])

    def exec_module(self, module):
        pass  # the nki module is already executed


def alias(prefix: str) -> None:
    """Serve ``<prefix>.X`` as ``nki.X`` from now on."""
    if not any(isinstance(f, PackageAlias) and f.prefix == prefix + "." for f in sys.meta_path):
        sys.meta_path.insert(0, PackageAlias(prefix))
