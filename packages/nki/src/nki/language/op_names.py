"""NKI op names of the ways kernels name an ALU/activation op: an nl function (``nl.add``), a
numpy ufunc (``np.add``) or reduction (``np.max``), an op-name object, or a string."""

from __future__ import annotations

import numpy as np

from .. import tracing

# numpy ufuncs legacy kernels pass as ops (op0=np.subtract), by ufunc name -> NKI op name.
_NUMPY_OP_NAMES = {"true_divide": "divide", "absolute": "abs", "bitwise_not": "invert"}
# numpy reduction functions legacy kernels pass as reduce ops (reduce_op=np.amax).
_NUMPY_REDUCTIONS = {"max": "maximum", "amax": "maximum", "min": "minimum", "amin": "minimum", "sum": "add",
                     "prod": "multiply"}


def op_name(op) -> str:
    if isinstance(op, np.ufunc):
        return _NUMPY_OP_NAMES.get(op.__name__, op.__name__)
    if getattr(op, "__module__", "").startswith("numpy") and op.__name__ in _NUMPY_REDUCTIONS:
        return _NUMPY_REDUCTIONS[op.__name__]  # np.max / np.amax / np.sum ... as reduce ops
    name = getattr(op, "op_name", op)
    if not isinstance(name, str):
        raise tracing.current().error("op.type", f"expected an op such as nl.add or nl.exp, got {op!r}")
    return name
