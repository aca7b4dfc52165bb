"""The compiler's one error type: what was refused, for which op, shapes and source line."""

from __future__ import annotations

from neuron_sim import ValidationError


class CompileError(ValidationError):
    """A graph the compiler cannot lower: an unsupported op, dtype or shape, or a malformed graph.

    ``op`` names the graph op (``"input"`` for a graph input), ``shapes`` the operand and result
    types as text (``"4x8xfloat32"``), ``location`` the node's source line when the graph has one.
    """

    def __init__(self, rule: str, message: str, *, op: str | None = None, shapes: list[str] | None = None,
                 location: str | None = None):
        self.op = op
        self.shapes = list(shapes or [])
        what = f"{op}" if op else "graph"
        if self.shapes:
            what += f" ({', '.join(self.shapes)})"
        super().__init__(rule, f"{what}: {message}", location)
        self.detail = message

    def at(self, location: str | None) -> CompileError:
        if location is None or self.location is not None:
            return self
        return CompileError(self.rule, self.detail, op=self.op, shapes=self.shapes, location=location)


def node_error(node, rule: str, message: str) -> CompileError:
    """A CompileError about graph node ``node`` (its op, operand/result types and location)."""
    shapes = [str(v.type) for v in node.inputs] + ["-> " + ", ".join(str(v.type) for v in node.outputs)]
    return CompileError(rule, message, op=node.op, shapes=shapes, location=node.location)
