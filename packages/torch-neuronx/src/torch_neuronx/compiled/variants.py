"""The functional overload behind an in-place (``add_``) or ``out=`` (``add.out``) overload.

Compiled graphs are functional: a mutating call is compiled as its functional overload and the
result written to the mutated arguments. The functional overload is the one of the same base name
(without the trailing ``_``) whose arguments are the mutating overload's non-mutated arguments.
"""

from __future__ import annotations

import functools

import torch

from ..ops.schema import mutated_arguments


def _arange(start, end, step=1):
    return torch.ops.aten.arange.start_step(start, end, step)


def _linspace(start, end, steps):
    return torch.ops.aten.linspace.default(start, end, steps)


def _logspace(start, end, steps, base=10.0):
    return torch.ops.aten.logspace.default(start, end, steps, base)


def _eye(n, m=None):
    return torch.ops.aten.eye.default(n) if m is None else torch.ops.aten.eye.m(n, m)


# out= factories whose functional overloads take other arguments (dtype, device...): the result
# is cast to the out= tensor's dtype afterwards, as for every out= op.
_FACTORIES = {"aten::arange.start_out": _arange, "aten::linspace.out": _linspace, "aten::logspace.out": _logspace,
              "aten::eye.out": _eye, "aten::eye.m_out": _eye}


# out= reductions and scans that, given no dtype, compute in the out= tensor's dtype (CPU's
# kernel converts each element first: -0.5 + -0.75 sums to 0 into an int32 out=, not to -1),
# so their functional overload is called with ``dtype=out.dtype``. Other out= ops compute in
# their own result's dtype and cast it on the way into the out= tensor.
COMPUTE_IN_OUT_DTYPE = frozenset({
    "aten::sum.out", "aten::sum.IntList_out", "aten::nansum.out", "aten::prod.out", "aten::prod.int_out",
    "aten::cumsum.out", "aten::cumprod.out", "aten::mean.out", "aten::nanmean.out",
})


@functools.cache
def functional_variant(op):
    """The functional OpOverload (or function) computing what ``op`` writes, or None."""
    schema = op._schema
    factory = _FACTORIES.get(f"{schema.name}.{op._overloadname}")
    if factory is not None:
        return factory
    mutated = set(mutated_arguments(op))
    namespace, base = schema.name.split("::", 1)
    if base.endswith("_"):
        base = base[:-1]
    packet = getattr(getattr(torch.ops, namespace), base, None)
    if packet is None:
        return None
    if schema.name.endswith("_"):  # add_(self, other, alpha) -> add(self, other, alpha): self is read too
        wanted = [(a.name, str(a.type)) for a in schema.arguments]
    else:  # add.out(self, other, alpha, out) -> add(self, other, alpha)
        wanted = [(a.name, str(a.type)) for a in schema.arguments if a.name not in mutated]
    for name in packet.overloads():
        candidate = getattr(packet, name)
        if candidate is op or any(a.alias_info is not None for a in candidate._schema.arguments):
            continue
        if [(a.name, str(a.type)) for a in candidate._schema.arguments] == wanted:
            return candidate
    return None


@functools.cache
def scalar_overload(op, names: tuple[str, ...]):
    """The overload of ``op``'s name that takes Scalars for the Tensor arguments ``names``
    (``remainder.Tensor`` -> ``remainder.Scalar``), or None. A Scalar overload calling its Tensor
    overload hands the number over as a "wrapped number", which reaches a Python kernel as a
    plain Python number."""
    schema = op._schema
    wanted = [(a.name, "number" if a.name in names else str(a.type)) for a in schema.arguments]  # Scalar prints as "number"
    packet = getattr(torch.ops.aten, schema.name.split("::", 1)[1], None)
    for name in packet.overloads() if packet is not None else ():
        candidate = getattr(packet, name)
        if [(a.name, str(a.type)) for a in candidate._schema.arguments] == wanted:
            return candidate
    return None


def _addcdiv(self, tensor1, tensor2, value=1):
    return self + value * tensor1 / tensor2  # CPU's kernel: self + value * t1 / t2, in this order


def _addcmul(self, tensor1, tensor2, value=1):
    # CPU's kernel: fma(value * t1, t2, self) - one rounding for the last multiply-add, where
    # this has two (as the compiled op with a constant value has): equal to float32 tolerance.
    return self + value * tensor1 * tensor2


# Scalars that change from call to call in a training loop (Adam's step size and bias
# correction, a scheduled learning rate): compiled in as constants, every new value compiled a
# new NEFF - every step. For these functional ops a float Scalar argument can instead be a 0-d
# float32 *input*; the op is then computed from tensors as these forms do (each the op's own
# Tensor overload, or CPU's order of operations). Only for float32 operands: CPU computes
# reduced-precision addcdiv in fp32 and rounds once, which a chain of bf16 ops would not.
RUNTIME_SCALARS: dict = {
    torch.ops.aten.div.Scalar: ("other", lambda self, other: torch.ops.aten.div.Tensor(self, other)),
    torch.ops.aten.mul.Scalar: ("other", lambda self, other: torch.ops.aten.mul.Tensor(self, other)),
    torch.ops.aten.lerp.Scalar: ("weight", lambda self, end, weight: torch.ops.aten.lerp.Tensor(self, end, weight)),
    torch.ops.aten.addcdiv.default: ("value", _addcdiv),
    torch.ops.aten.addcmul.default: ("value", _addcmul),
}


def _each(per_tensor):
    """A foreach op's runtime form: ``per_tensor(self[i], ...lists[i], scalar)`` for each i."""
    def form(self, *rest):
        *lists, scalar = rest
        return [per_tensor(x, *(other[i] for other in lists), scalar) for i, x in enumerate(self)]
    return form


def _each_of_list(per_tensor):
    """A foreach op's runtime form for a Scalar[] given as a 1-d tensor: ``scalars[i]`` each."""
    def form(self, *rest):
        *lists, scalars = rest
        return [per_tensor(x, *(other[i] for other in lists), scalars[i]) for i, x in enumerate(self)]
    return form


_aten = torch.ops.aten
# Optimizers call foreach ops with the learning rate, betas and bias corrections as Scalars and
# Scalar[]s (a float per tensor, new every step): the same runtime forms over each tensor. A
# Scalar[] arrives as one 1-d float32 device tensor.
for _base, _per_tensor in (("mul", _aten.mul.Tensor), ("div", _aten.div.Tensor), ("add", _aten.add.Tensor),
                           ("sub", _aten.sub.Tensor), ("lerp", _aten.lerp.Tensor), ("addcdiv", _addcdiv),
                           ("addcmul", _addcmul)):
    _packet = getattr(_aten, f"_foreach_{_base}")
    _name = {"lerp": "weight", "addcdiv": "value", "addcmul": "value"}.get(_base, "scalar")
    _list_name = "weight" if _base == "lerp" else "scalars"
    RUNTIME_SCALARS[_packet.Scalar] = (_name, _each(_per_tensor))
    RUNTIME_SCALARS[_packet.ScalarList] = (_list_name, _each_of_list(_per_tensor))
# The fused optimizers' learning rate: their tensor_lr overloads take it as a tensor.
for _name in ("_fused_adam", "_fused_adamw", "_fused_sgd"):
    _packet = getattr(_aten, _name)
    RUNTIME_SCALARS[_packet.default] = ("lr", _packet.tensor_lr)


def _adagrad_tensor_lr(self, grads, state_sums, state_steps, **kwargs):
    """``_fused_adagrad.default`` also hands back ``state_steps`` (as they were); tensor_lr does not."""
    return (*_aten._fused_adagrad.tensor_lr(self, grads, state_sums, state_steps, **kwargs), list(state_steps))


RUNTIME_SCALARS[_aten._fused_adagrad.default] = ("lr", _adagrad_tensor_lr)
