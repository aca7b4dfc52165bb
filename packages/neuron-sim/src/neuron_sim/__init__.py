"""neuron_sim: a software NeuronCore.

Architecture data per generation, memories (HBM, SBUF, PSUM), the instruction set, an exact
executor with the hardware's numerics, a timing model, the NEFF file format and cache, and a
runtime of devices, queues and events.
"""

from . import dtypes, executor, graph, isa, neff, runtime, timing, trace
from .arch import Architecture, get_architecture
from .builder import HbmTensor, ProgramBuilder, Tile
from .errors import (
    AccessPatternError,
    ConfigurationError,
    ExecutionError,
    IndexOutOfBoundsError,
    InvalidMemoryError,
    NeffFormatError,
    NeuronSimError,
    OutOfMemoryError,
    UninitializedReadError,
    ValidationError,
)
from .executor import ExactExecutor, FastExecutor
from .fingerprint import code_fingerprint
from .memory import AccessPattern, Hbm
from .neff import Neff, NeffCache
from .program import Program, TensorDecl
from .runtime import Event, Runtime, get_runtime
from .timing import TimingResult, estimate

__version__ = "0.1.0"

__all__ = [
    "dtypes", "executor", "graph", "isa", "neff", "runtime", "timing", "trace", "Neff", "NeffCache", "Event", "Runtime", "get_runtime",
    "TimingResult", "estimate", "Architecture", "get_architecture", "ProgramBuilder", "HbmTensor", "Tile",
    "AccessPatternError", "ConfigurationError", "ExecutionError", "IndexOutOfBoundsError", "InvalidMemoryError", "NeffFormatError", "NeuronSimError",
    "OutOfMemoryError", "UninitializedReadError", "ValidationError", "ExactExecutor", "FastExecutor", "AccessPattern", "Hbm",
    "Program", "TensorDecl", "code_fingerprint", "__version__",
]
