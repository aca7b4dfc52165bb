"""The decomposition table of the neuron backend: what AOTAutograd and the re-trace decompose.

neuronx-cc's table (torch-mlir's, with its semantic corrections) so graphs arrive as the core
ATen torch-mlir lowers, minus decompositions of random ops: a random draw must stay one node so
it runs before the launch as eager runs it (same generator, same order, same numbers). Plus the
``_foreach_*`` ops of compiled optimizer steps, which torch-mlir has no lowering for: each becomes
its per-tensor op, and the compiler fuses the lot into one NEFF. ``fill`` and ``masked_fill`` of
a number first make CPU's check of that number against the tensor's dtype (the decompositions
convert it unchecked: int8 ``masked_fill(m, 300)`` filled 44 where CPU raises).
"""

from __future__ import annotations

import functools

import torch
from neuronxcc.frontend.fx import decompositions as compiler_table
from torch.utils._python_dispatch import _disable_current_modes

# Ops whose CPU kernel converts their number (the last argument) to the tensor's dtype with an
# overflow check at the call, whatever the mask and the values.
_CHECKS_ITS_NUMBER = ("fill.Scalar", "fill_.Scalar", "masked_fill.Scalar", "masked_fill_.Scalar")


@functools.cache
def _table() -> dict:
    table = {op: fn for op, fn in compiler_table().items()
             if not (isinstance(op, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in op.tags)}
    for name in dir(torch.ops.aten):
        if not name.startswith("_foreach_") or name.endswith("_"):
            continue  # functionalized graphs hold only the functional foreach overloads
        packet = getattr(torch.ops.aten, name)
        base = getattr(torch.ops.aten, name.removeprefix("_foreach_"), None)
        if base is None:
            continue
        for overload in packet.overloads():
            table[getattr(packet, overload)] = _per_tensor(base)
    for name in _CHECKS_ITS_NUMBER:
        packet, overload = name.split(".")
        op = getattr(getattr(torch.ops.aten, packet), overload)
        table[op] = _number_checked(table[op])
    return table


def _number_checked(decomposition):
    """``decomposition`` after CPU's own conversion check of the number: the real kernel on an
    empty tensor of the dtype ('value cannot be converted to type int8_t without overflow'),
    outside the tracing modes, so it is raised at the call as CPU raises it."""

    def checked(self, *args, **kwargs):
        value = kwargs["value"] if "value" in kwargs else args[-1]
        if isinstance(value, (int, float)):
            with _disable_current_modes():
                torch.empty(0, dtype=self.dtype).fill_(value)
        return decomposition(self, *args, **kwargs)

    return checked


def _per_tensor(base):
    """``_foreach_op(tensors, other...)`` as ``[op(t, other_i...) for t in tensors]``: a list argument
    as long as ``tensors`` (tensors or scalars) is taken element by element, anything else as is.
    Foreach schemas take scalars positionally where the per-tensor op takes them by keyword
    (``addcmul``'s ``value``), so arguments are matched by position against each schema of ``base``."""

    schemas = [getattr(base, name)._schema for name in base.overloads()]

    def decomposition(*args, **kwargs):
        values = list(args) + list(kwargs.values())
        # The list that sets the count: usually ``self``, but ``_foreach_pow(scalar, exponents)``.
        n = len(next(v for v in values if isinstance(v, (list, tuple)) and v and isinstance(v[0], torch.Tensor)))

        def pick(value, i):
            return value[i] if isinstance(value, (list, tuple)) and len(value) == n else value

        return [_call_by_position(base, schemas, [pick(v, i) for v in values]) for i in range(n)]

    return decomposition


def _call_by_position(base, schemas, values):
    last = None
    for schema in schemas:
        if len(schema.arguments) < len(values):
            continue
        k = sum(not a.kwarg_only for a in schema.arguments)
        try:
            return base(*values[:k], **{schema.arguments[j].name: values[j] for j in range(k, len(values))})
        except (RuntimeError, TypeError) as err:  # another overload's schema
            last = err
    raise RuntimeError(f"no schema of {base} takes {len(values)} arguments: {last}")


def decompositions() -> dict:
    return dict(_table())
