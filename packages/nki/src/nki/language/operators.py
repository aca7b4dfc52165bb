"""NkiTensor's legacy operators: ``a + b``, ``-a``, ``a < b``, ``t[...] = v``, ``psum[...] += nl.matmul(...)``
and ``t.broadcast_to(shape)``.

Each of them builds instructions, which is the language's job, not the tensor layer's (a tensor
only describes memory). So they are defined here and attached to ``NkiTensor`` when
``nki.language`` is imported - the way JAX attaches its numpy methods to its Array type. Every
kernel is traced with ``nki.language`` imported (``nki`` imports it), so the operators are always
there when a kernel runs.
"""

from __future__ import annotations

from ..tensor import NkiTensor, broadcast_view
from . import math_ops
from .memory_ops import accumulate_into, assign

# dunder name -> ALU op; each also gets its reflected form (``2 * t`` is ``__rmul__``).
_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide", "pow": "power",
    "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
}
# comparisons have no reflected dunders: ``2 < t`` calls ``t.__gt__(2)``.
_COMPARE = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal"}


def _forward(op: str):
    def method(self, other):
        return math_ops.binary(op, self, other)

    return method


def _reflected(op: str):
    def method(self, other):
        return math_ops.binary(op, other, self)

    return method


def _neg(self):
    return math_ops.unary("negative", self)


def _setitem(self, key, value) -> None:
    assign(self[key], value)


def _iadd(self, other):
    return accumulate_into(self, other)


def _broadcast_to(self, shape) -> NkiTensor:
    """Broadcast size-1 dims to ``shape`` (legacy method). Free dims broadcast as a view; a
    one-partition tile is copied to every partition through TensorE (as nl.broadcast_to)."""
    shape = tuple(shape)
    view = self
    if self.storage.on_chip and self.shape[0] == 1 and shape and shape[0] != 1:
        view = math_ops.broadcast_partitions(self, shape[0])
    return broadcast_view(view, shape)


def install(cls: type[NkiTensor]) -> None:
    for dunder, op in _BINARY.items():
        setattr(cls, f"__{dunder}__", _forward(op))
        setattr(cls, f"__r{dunder}__", _reflected(op))
    for dunder, op in _COMPARE.items():
        setattr(cls, f"__{dunder}__", _forward(op))
    cls.__neg__ = _neg
    cls.__setitem__ = _setitem
    cls.__iadd__ = _iadd
    cls.broadcast_to = _broadcast_to


install(NkiTensor)
