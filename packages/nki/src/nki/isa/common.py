"""What every nki.isa instruction wrapper shares: operand conversion (tensors to access patterns,
ops given as nl functions / numpy ufuncs / names), the legacy call form, and emitting."""

from __future__ import annotations

import functools
import inspect

import numpy as np
from neuron_sim import get_architecture
from neuron_sim import isa as sim

from .. import tracing
from ..language.memory_ops import apply_mask, inherit_window, ndarray
from ..language.op_names import op_name as _op  # noqa: F401 - the isa modules take it from here
from ..tensor import NkiTensor
from .constants import engine, nc_version


class NkiInstruction:
    """Handle to an emitted instruction (``name=`` lookups and ``depends_on`` ordering)."""

    def __init__(self, inst: sim.Instruction):
        self.instruction = inst

    def depends_on(self, *producers) -> NkiInstruction:
        return self  # program order already orders every engine's stream


def get_nc_version() -> nc_version:
    return nc_version[get_architecture().nc_version]


def _engine(value, default: str | None = None) -> str | None:
    name = value.name if isinstance(value, engine) else value
    if name in (None, "unknown"):
        return default
    return name


def _ap(x, role: str):
    if isinstance(x, NkiTensor):
        return x.access_pattern()
    raise tracing.current().error("operand.type", f"{role} must be a tensor, got {type(x).__name__}")


def _operand(x):
    """A scalar operand: an immediate or a per-partition [P, 1] tile."""
    if isinstance(x, NkiTensor):
        return x.reshape((x.shape[0], 1)).access_pattern() if x.size == x.shape[0] else x.access_pattern()
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise tracing.current().error("operand.type", f"expected a number or a [P, 1] tile, got {x!r}")
    return x.item() if isinstance(x, np.generic) else x


def _dst_or_new(dst, like: NkiTensor, dtype=None, buffer="sbuf") -> NkiTensor:
    return dst if dst is not None else ndarray(like.shape, dtype or like.dtype, buffer)


def _legacy_form(*tensor_params: str, masked: tuple[str, ...] | None = None):
    """Accept the legacy ``neuronxcc.nki.isa`` call form too: the same parameters without ``dst``
    (``nisa.nc_matmul(a, b)``, ``nisa.tensor_reduce(nl.max, x, axis=1)``), returning a new tile,
    with the legacy ``mask=`` (applied to the ``masked`` tensors, by default all of them). A call
    is legacy when ``dst`` is not passed by keyword and binding it to the NKI 0.6 signature leaves
    one of ``tensor_params`` without a tensor."""

    def wrap(func):
        names = list(inspect.signature(func).parameters)  # names[0] is "dst"

        @functools.wraps(func)
        def call(*args, **kwargs):
            mask = kwargs.pop("mask", None)
            if isinstance(mask, (bool, np.bool_)):  # folded at trace time (see folds_constant_mask)
                if not mask:
                    with tracing.current().masked_off():
                        return call(*args, **kwargs)
                mask = None
            bound = {**dict(zip(names, args)), **kwargs}
            # dst is a tensor in the NKI 0.6 form: a first argument that is not (nisa.tensor_reduce(np.add,
            # data=x, ...)) is the legacy form's op, even when the tensors come by keyword
            if "dst" not in kwargs and (args and args[0] is not None and not isinstance(args[0], NkiTensor)
                                        or any(not isinstance(bound.get(p), NkiTensor) for p in tensor_params)):
                bound = {**dict(zip(names[1:], args)), **kwargs}
            if mask is not None:
                keys = [k for k, v in bound.items() if isinstance(v, NkiTensor) and (masked is None or k in masked)]
                bound.update(zip(keys, apply_mask(mask, *(bound[k] for k in keys))))
            result = func(**bound)
            if bound.get("dst") is None:  # a new tile: it covers the window its masked inputs cover
                inherit_window(result, *(bound[p] for p in tensor_params))
            return result

        return call

    return wrap


def _emit(inst: sim.Instruction, name=None) -> NkiInstruction:
    inst.name = name
    tracing.current().emit(inst)
    return NkiInstruction(inst)
