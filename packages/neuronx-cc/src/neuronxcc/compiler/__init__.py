"""neuronx-cc: lowers graph IR (``neuron_sim.graph``) onto a NeuronCore as an ISA program.

    from neuronxcc.compiler import compile_graph, compile_neff, CompileError
    program = compile_graph(graph)          # neuron_sim.Program (graph-level form attached)
    neff = compile_neff(graph, "trn2")      # program + timing summary + metadata

Pipeline: ``checks`` (dtypes, shapes) -> ``fold`` -> ``integers`` (exact integers, or a refusal:
``integer_refusals(graph)`` lists them) -> ``fusion`` (groups) -> ``lower`` (one lowering per group
kind, tiled by ``layout`` onto SBUF via ``sbuf``/``dma``) -> ``ProgramBuilder.build``.
"""

from .constants import constant_arrays
from .driver import COMPILER, VERSION, code_fingerprint, compile_graph, compile_neff
from .errors import CompileError
from .fusion import OP_KINDS, Group, partition
from .integers import INEXACT_INTEGER, integer_refusals
from .lower import LOWERINGS, register_lowering

__version__ = VERSION

__all__ = [
    "compile_graph", "compile_neff", "CompileError", "constant_arrays", "partition", "Group", "OP_KINDS", "LOWERINGS",
    "register_lowering", "code_fingerprint", "COMPILER", "VERSION", "__version__", "INEXACT_INTEGER",
    "integer_refusals",
]
