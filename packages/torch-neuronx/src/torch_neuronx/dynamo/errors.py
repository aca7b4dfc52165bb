"""The error a graph that cannot be compiled for the NeuronCore raises, naming the op and its source line."""

from __future__ import annotations

import re

FALLBACK_ADVICE = ("set TORCH_NEURONX_COMPILE_FALLBACK=eager (or torch.compile(..., backend=\"neuron\", "
                   "options={\"fallback\": \"eager\"})) to run such graphs op by op on the device instead")


class NeuronCompileError(RuntimeError):
    """A graph of ``torch.compile(backend="neuron")`` has something the NeuronCore compiler cannot
    lower. ``op`` is the op (``aten.erfinv.default``, ``stablehlo.sort``), ``location`` the user's
    source line (``model.py:42``) when known, ``reason`` what exactly is missing, ``rule`` the
    compiler's rule when neuronx-cc refused the graph (``compile.inexact_integer``)."""

    def __init__(self, op: str, reason: str, location: str | None = None, graph: str | None = None,
                 rule: str | None = None):
        self.op, self.reason, self.location, self.graph, self.rule = op, reason, location, graph, rule
        where = f" at {location}" if location else ""
        in_graph = f" in {graph}" if graph else ""
        super().__init__(f"cannot compile '{op}'{where}{in_graph} for the NeuronCore: {reason}\n  {FALLBACK_ADVICE}")


def source_line(node) -> str | None:
    """``file:line`` of the user code an FX node came from (the innermost frame of its stack trace)."""
    trace = node.meta.get("stack_trace") or getattr(node, "stack_trace", None) or ""
    frames = re.findall(r'File "([^"]+)", line (\d+)', trace)
    return f"{frames[-1][0]}:{frames[-1][1]}" if frames else None


def unsupported(node, reason: str) -> NeuronCompileError:
    return NeuronCompileError(str(node.target), reason, source_line(node))


class NeuronDynamicShapeError(RuntimeError):
    """dynamo handed the backend a graph with symbolic shapes: NEFFs are compiled for static shapes."""

    def __init__(self, graph: str):
        super().__init__(
            f"{graph} has dynamic shapes, but the neuron backend compiles static shapes (one NEFF per shape). "
            "Compile with torch.compile(model, backend=\"neuron\", dynamic=False) (or set "
            "torch._dynamo.config.automatic_dynamic_shapes = False) so each new shape compiles its own graph, "
            "and pad inputs to a few bucket sizes with torch_neuronx.dynamo.pad_to_bucket to bound the number "
            "of graphs; or set TORCH_NEURONX_COMPILE_FALLBACK=eager to run dynamic graphs op by op.")
