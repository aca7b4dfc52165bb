"""The legacy ``neuronxcc.nki`` import path, served by the standalone ``nki`` package.

``import neuronxcc.nki as nki``, ``neuronxcc.nki.language as nl``, ``neuronxcc.nki.isa as nisa``
and every other ``neuronxcc.nki.<module>`` (``typing``, ``compiler``, ``isa.constants``, ...) give
the same module objects as ``nki.<module>`` (``neuronxcc`` is a namespace package so the compiler
package can add its own modules beside this one).
"""

import importlib
import importlib.abc
import importlib.util
import sys

import nki as _nki
from nki import *  # noqa: F403
from nki import isa, language  # noqa: F401 - the submodules legacy code reaches as attributes
from nki.legacy import jit, profile, tensor, trace  # noqa: F401 - the legacy forms (platform_target honoured)

_PREFIX = __name__ + "."


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``neuronxcc.nki.X`` as the module ``nki.X`` (one module object under two names)."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(_PREFIX):
            return None
        try:
            target_spec = importlib.util.find_spec("nki." + fullname[len(_PREFIX):])
        except ModuleNotFoundError:
            return None
        if target_spec is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=target_spec.submodule_search_locations is not None)

    def create_module(self, spec):
        return importlib.import_module("nki." + spec.name[len(_PREFIX):])

    def exec_module(self, module):
        pass  # the nki module is already executed


sys.meta_path.insert(0, _Alias())
__all__ = list(_nki.__all__) + ["trace", "profile", "tensor"]
