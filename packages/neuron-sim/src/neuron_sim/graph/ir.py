"""The graph-level form of a NEFF: a dataflow graph of whole-tensor operations.

A compiler keeps this beside the ISA program it lowers it to; the fast executor evaluates it
(``evaluate.py``) over whole tensors, while the exact executor interprets the ISA. Ops and their
attributes are defined in ``ops.py``; values are numbered and typed; graph inputs and outputs are
named after the program's HBM tensors so one set of buffers serves both forms.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import dtypes
from ..errors import ValidationError
from .ops import infer
from .tensor_type import TensorType


@dataclass(eq=False)
class Value:
    id: int
    type: TensorType
    name: str | None = None  # graph inputs/outputs: the HBM tensor they bind to


@dataclass(eq=False)
class Node:
    op: str
    inputs: list[Value]
    outputs: list[Value]
    attrs: dict = field(default_factory=dict)
    location: str | None = None  # source line (kernel, model code) for error messages


class Graph:
    """Nodes in topological order (the order they were added)."""

    def __init__(self, name: str = "graph"):
        self.name = name
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []
        self.outputs: list[Value] = []
        self._next = 0

    def _value(self, type_: TensorType, name: str | None = None) -> Value:
        v = Value(self._next, type_, name)
        self._next += 1
        return v

    def add_input(self, name: str, shape, dtype) -> Value:
        v = self._value(TensorType(tuple(shape), dtype), name)
        self.inputs.append(v)
        return v

    def add(self, op: str, inputs: list[Value], attrs: dict | None = None, location: str | None = None) -> list[Value]:
        """Append ``op`` applied to ``inputs``; output types come from the op's shape rule."""
        attrs = dict(attrs or {})
        types = infer(op, [v.type for v in inputs], attrs)
        outs = [self._value(t) for t in types]
        self.nodes.append(Node(op, list(inputs), outs, attrs, location))
        return outs

    def add1(self, op: str, *inputs: Value, location: str | None = None, **attrs) -> Value:
        (out,) = self.add(op, list(inputs), attrs, location)
        return out

    def set_outputs(self, values: list[Value], names: list[str]) -> None:
        if len(values) != len(names):
            raise ValidationError("graph.outputs", f"{len(values)} outputs but {len(names)} names")
        self.outputs = []
        for v, name in zip(values, names):
            if v.name is not None and v.name != name:  # an input returned as-is, or one value twice
                v = self.add1("copy", v)
            v.name = name
            self.outputs.append(v)

    # --- serialization ---------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "inputs": [[v.id, v.name, *v.type.to_list()] for v in self.inputs],
            "nodes": [
                {"op": n.op, "in": [v.id for v in n.inputs], "out": [[v.id, *v.type.to_list()] for v in n.outputs],
                 "attrs": _encode(n.attrs), **({"loc": n.location} if n.location else {})}
                for n in self.nodes
            ],
            "outputs": [[v.id, v.name] for v in self.outputs],
        }

    @classmethod
    def from_dict(cls, d: dict) -> Graph:
        g = cls(d.get("name", "graph"))
        values: dict[int, Value] = {}
        try:
            for vid, name, shape, dtype in d["inputs"]:
                v = values[vid] = Value(vid, TensorType(tuple(shape), dtype), name)
                g.inputs.append(v)
            for n in d["nodes"]:
                outs = []
                for vid, shape, dtype in n["out"]:
                    outs.append(Value(vid, TensorType(tuple(shape), dtype)))
                    values[vid] = outs[-1]
                g.nodes.append(Node(n["op"], [values[i] for i in n["in"]], outs, _decode(n.get("attrs", {})), n.get("loc")))
            for vid, name in d["outputs"]:
                values[vid].name = name
                g.outputs.append(values[vid])
        except (KeyError, TypeError, ValueError) as err:
            raise ValidationError("graph.format", f"malformed graph: {type(err).__name__}: {err}") from None
        g._next = max(values, default=-1) + 1
        return g

    def __str__(self) -> str:
        lines = [f"graph {self.name}({', '.join(f'%{v.id}:{v.name}:{v.type}' for v in self.inputs)})"]
        for n in self.nodes:
            outs = ", ".join(f"%{v.id}:{v.type}" for v in n.outputs)
            lines.append(f"  {outs} = {n.op}({', '.join(f'%{v.id}' for v in n.inputs)}) {n.attrs or ''}")
        lines.append(f"  return {', '.join(f'%{v.id}:{v.name}' for v in self.outputs)}")
        return "\n".join(lines)


def _encode(attrs: dict) -> dict:
    out = {}
    for k, v in attrs.items():
        if hasattr(v, "tolist"):  # numpy constants
            out[k] = {"array": v.tolist(), "dtype": dtypes.dtype_name(v.dtype), "shape": list(v.shape)}
        elif isinstance(v, tuple):
            out[k] = {"tuple": list(v)}
        elif isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            out[k] = {"float": repr(v)}
        else:
            out[k] = v
    return out


def _decode(attrs: dict) -> dict:
    import numpy as np

    out = {}
    for k, v in attrs.items():
        if isinstance(v, dict) and "array" in v:
            out[k] = np.asarray(v["array"], dtype=np.float64 if dtypes.is_float(v["dtype"]) else np.int64).astype(
                dtypes.to_numpy(v["dtype"])).reshape(v["shape"])
        elif isinstance(v, dict) and "tuple" in v:
            out[k] = tuple(tuple(x) if isinstance(x, list) else x for x in v["tuple"])
        elif isinstance(v, dict) and "float" in v:
            out[k] = float(v["float"])
        else:
            out[k] = v
    return out
