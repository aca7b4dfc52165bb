"""``neuron_dtypes``: the Neuron SDK's numpy-side dtype helpers that NKI test code imports
(nki-library's test harness), served from nki's dtypes: ``static_cast`` (round to a dtype),
``finfo``, ``sizeinbytes``, ``is_float_type`` and the numpy types of the NeuronCore's
dtypes (``bfloat16`` and the float8 types from ml_dtypes). The MX block types (``*_x4``) are not
modelled (see the nki README)."""

from __future__ import annotations

import ml_dtypes
from neuron_sim import dtypes as _sim_dtypes
from nki.language.dtypes import finfo, static_cast

bfloat16 = ml_dtypes.bfloat16
float8_e4m3 = ml_dtypes.float8_e4m3
float8_e4m3fn = ml_dtypes.float8_e4m3fn
float8_e5m2 = ml_dtypes.float8_e5m2


def sizeinbytes(dtype) -> int:
    """Bytes per element of ``dtype`` (a numpy dtype, an NKI dtype or its name)."""
    return _sim_dtypes.itemsize(_sim_dtypes.dtype_name(dtype))


def is_float_type(dtype) -> bool:
    """Whether ``dtype`` is a floating-point type (float32, bfloat16, the float8 types, ...)."""
    return _sim_dtypes.is_float(_sim_dtypes.dtype_name(dtype))


__all__ = ["static_cast", "finfo", "sizeinbytes", "is_float_type", "bfloat16", "float8_e4m3", "float8_e4m3fn",
           "float8_e5m2"]
