"""nisa instructions that scan along the free dim or reduce into VectorE's accumulators:
tensor_scalar_cumulative, tensor_tensor_scan, select_reduce, range_select (NKI 0.6 signatures,
legacy call forms returning a new tile accepted too)."""

from __future__ import annotations

from neuron_sim import isa as sim

from ..language.dtypes import fp32
from ..tensor import NkiTensor
from .common import _ap, _dst_or_new, _emit, _legacy_form, _op, _operand
from .constants import reduce_cmd


def _cmd(value) -> str:
    return value.name if isinstance(value, reduce_cmd) else str(value)


def _reduce_op(op) -> str:
    name = _op(op)
    return {"amax": "maximum", "max": "maximum"}.get(name, name)  # legacy code passes np.amax


@_legacy_form("src")
def tensor_scalar_cumulative(dst: NkiTensor = None, src: NkiTensor = None, op0=None, op1=None, imm0=None, imm1=None,
                             reduce_cmd=reduce_cmd.reset_reduce, name=None, dtype=None, reverse0=False):
    """``acc = op1(op0(src[i], imm0), acc); dst[i] = acc`` along each row (VectorE); ``acc`` starts
    as ``reduce_cmd`` says (``load_reduce``: from ``imm1``) and stays in the accumulators."""
    out = _dst_or_new(dst, src, dtype)
    _emit(sim.TensorScalarCumulative(dst=_ap(out, "dst"), src=_ap(src, "src"), op0=_op(op0), imm0=_operand(imm0),
                                     op1=_op(op1), imm1=None if imm1 is None else _operand(imm1), reverse0=bool(reverse0),
                                     reduce_cmd=_cmd(reduce_cmd)), name)
    return out


@_legacy_form("data0", "data1")
def tensor_tensor_scan(dst: NkiTensor = None, data0: NkiTensor = None, data1: NkiTensor = None, initial=None, op0=None,
                       op1=None, reverse0=False, reverse1=False, name=None, dtype=None):
    """``r[i] = op1(op0(data0[i], r[i-1]), data1[i])`` along each row, from ``initial`` (VectorE)."""
    out = _dst_or_new(dst, data0, dtype)
    _emit(sim.TensorTensorScan(dst=_ap(out, "dst"), data0=_ap(data0, "data0"), data1=_ap(data1, "data1"),
                               initial=_operand(initial), op0=_op(op0), op1=_op(op1), reverse0=bool(reverse0),
                               reverse1=bool(reverse1)), name)
    return out


@_legacy_form("predicate", "on_true")
def select_reduce(dst: NkiTensor = None, predicate: NkiTensor = None, on_true: NkiTensor = None, on_false=None,
                  reduce_res: NkiTensor | None = None, reduce_cmd=reduce_cmd.idle, reduce_op="maximum", reverse_pred=False,
                  name=None, dtype=None):
    """``dst = predicate ? on_true : on_false``; the row max through the accumulators into ``reduce_res``."""
    out = _dst_or_new(dst, on_true, dtype)
    _emit(sim.SelectReduce(dst=_ap(out, "dst"), predicate=_ap(predicate, "predicate"), on_true=_ap(on_true, "on_true"),
                           on_false=_operand(on_false), reduce_res=None if reduce_res is None else _ap(reduce_res, "reduce_res"),
                           reduce_cmd=_cmd(reduce_cmd), reduce_op=_reduce_op(reduce_op), reverse_pred=bool(reverse_pred)), name)
    return out


@_legacy_form("on_true_tile", "bound0", "bound1")
def range_select(dst: NkiTensor = None, on_true_tile: NkiTensor = None, comp_op0=None, comp_op1=None,
                 bound0: NkiTensor = None, bound1: NkiTensor = None, reduce_cmd=reduce_cmd.reset_reduce,
                 reduce_res: NkiTensor | None = None, reduce_op="maximum", range_start=0, on_false_value=fp32.min,
                 name=None, dtype=None):
    """``dst[p, i] = on_true[p, i]`` where both ``comp_op(range_start + i, bound[p])`` hold, else
    ``on_false_value``; the row max through the accumulators into ``reduce_res`` (VectorE, NC-v3+)."""
    out = _dst_or_new(dst, on_true_tile, dtype)
    _emit(sim.RangeSelect(dst=_ap(out, "dst"), on_true=_ap(on_true_tile, "on_true_tile"), comp_op0=_op(comp_op0),
                          comp_op1=_op(comp_op1), bound0=_ap(bound0, "bound0"), bound1=_ap(bound1, "bound1"),
                          on_false_value=float(on_false_value), range_start=int(range_start),
                          reduce_res=None if reduce_res is None else _ap(reduce_res, "reduce_res"),
                          reduce_cmd=_cmd(reduce_cmd), reduce_op=_reduce_op(reduce_op)), name)
    return out
