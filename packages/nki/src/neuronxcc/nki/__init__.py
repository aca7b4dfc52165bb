"""The legacy ``neuronxcc.nki`` import path, served by the standalone ``nki`` package.

``import neuronxcc.nki as nki``, ``neuronxcc.nki.language as nl``, ``neuronxcc.nki.isa as nisa``
and every other ``neuronxcc.nki.<module>`` (``typing``, ``compiler``, ``isa.constants``, ...) give
the same module objects as ``nki.<module>`` (``neuronxcc`` is a namespace package so the compiler
package can add its own modules beside this one).
"""

import nki as _nki
from nki import *  # noqa: F403
from nki import aliases as _aliases
from nki import isa, language  # noqa: F401 - the submodules legacy code reaches as attributes
from nki.legacy import jit, profile, tensor, trace  # noqa: F401 - the legacy forms (platform_target honoured)

_aliases.alias(__name__)
__all__ = list(_nki.__all__) + ["trace", "profile", "tensor"]
