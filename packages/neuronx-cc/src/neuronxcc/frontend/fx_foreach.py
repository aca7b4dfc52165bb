"""``torch._foreach_*`` ops as the per-tensor ops they stand for, so one call over a list of
tensors is traced into one graph (one NEFF, one launch) instead of running op by op.

CPU's foreach kernels are exactly this loop (``op(self[i], other[i], scalars[i], ...)``), so the
decomposition keeps CPU's numerics. A ``Tensor scalars`` argument of ``addcmul`` / ``addcdiv``
(one value per tensor) is written out as CPU's kernel computes it, ``self + value * t1 / t2``
(``* t2`` for addcmul) with ``value = scalars[i]``, so the scalars can be a runtime input.
"""

from __future__ import annotations

PREFIX = "_foreach_"
# Per-tensor ops whose name is not the foreach op's name without its prefix.
_PER_TENSOR = {"norm": "linalg_vector_norm", "max": "amax"}
# powsum is linalg__powsum's helper; mm and copy / zero keep their own kernels' aliasing rules.
_SKIPPED = {"powsum", "mm", "copy", "zero"}


def foreach_decompositions(torch) -> dict:
    """{functional ``aten._foreach_*`` overload: its per-tensor decomposition}."""
    table = {}
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::" + PREFIX):
            continue
        base, _, overload = name[len("aten::"):].partition(".")
        per_tensor = base[len(PREFIX):]
        if base.endswith("_") or overload.endswith("out") or per_tensor in _SKIPPED:
            continue  # in-place and out= forms are functionalized into these
        op = getattr(getattr(torch.ops.aten, base), overload or "default")
        table[op] = _per_tensor(torch, op, _PER_TENSOR.get(per_tensor, per_tensor), overload)
    return table


def _per_tensor(torch, op, per_tensor: str, overload: str):
    aten = torch.ops.aten
    target = getattr(aten, per_tensor)
    schema = op._schema.arguments
    lists = [a.name for a in schema if str(a.type) in ("List[Tensor]", "List[number]", "List[Scalar]")]
    positional = [a.name for a in schema if not a.kwarg_only]
    tensor_scalars = per_tensor in ("addcmul", "addcdiv") and overload == "Tensor"
    # Arguments positional in the foreach schema but keyword-only in the per-tensor op's
    # (``_foreach_addcmul.Scalar``'s ``value``; ``addcmul``'s is ``*, value``) go by name: the
    # caller may hand them over positionally (an int ``value=-1``, which stays a compile-time
    # constant, arrives that way) and the per-tensor op rejects a fourth positional argument.
    by_name = {a.name for o in target.overloads() for a in getattr(target, o)._schema.arguments if a.kwarg_only}

    def decomposition(*args, **kwargs):
        bound = dict(zip(positional, args))
        bound.update(kwargs)
        count = len(bound[lists[0]])
        results = []
        for i in range(count):
            call = {n: (v[i] if n in lists else v) for n, v in bound.items()}
            if tensor_scalars:  # CPU: self + value * t1 / t2 (or * t2), value = scalars[i]
                scaled = call.pop("scalars")[i] * call["tensor1"]
                other = scaled / call["tensor2"] if per_tensor == "addcdiv" else scaled * call["tensor2"]
                results.append(call["self"] + other)
                continue
            args_i = [call.pop(n) for n in positional if n in call and n not in by_name]
            if per_tensor == "linalg_vector_norm":
                results.append(target(args_i[0], args_i[1] if len(args_i) > 1 else 2, dtype=call.get("dtype")))
            else:
                results.append(target(*args_i, **call))
        return results

    return decomposition
