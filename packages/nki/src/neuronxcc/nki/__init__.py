"""The legacy ``neuronxcc.nki`` import path, served by the standalone ``nki`` package.

``import neuronxcc.nki as nki``, ``neuronxcc.nki.language as nl`` and ``neuronxcc.nki.isa as
nisa`` give the same modules as ``nki``, ``nki.language`` and ``nki.isa`` (``neuronxcc`` is a
namespace package so the compiler package can add its own modules beside this one).
"""

import sys

import nki as _nki
from nki import *  # noqa: F403
from nki import isa, language

sys.modules[__name__ + ".language"] = language
sys.modules[__name__ + ".isa"] = isa
__all__ = list(_nki.__all__)
