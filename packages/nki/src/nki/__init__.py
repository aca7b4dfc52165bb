"""NKI, the Neuron Kernel Interface, on a software NeuronCore.

    import nki, nki.language as nl, nki.isa as nisa

    @nki.jit
    def add(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.load(b)))
        return out

    c = add(a_np, b_np)                  # numpy in, numpy out, on the exact executor
    add.last_timing[0].summary           # simulated device time, engine busy %, MFU, HBM bytes

Kernels are traced once per argument signature into simulator programs and run with the
hardware's numerics; hardware-rule violations raise NkiValidationError naming the kernel line.
"""

from . import compiler, isa, language
from .arrays import ArrayType, register_array_type, registered_array_types, unregister_array_type
from .benchmarking import BenchmarkResult, Latency, benchmark
from .errors import NkiError, NkiValidationError
from .kernel import CompiledKernel, Kernel, jit
from .language.dtypes import DType as dtype
from .simulation import baremetal, cpu_simulate, simulate, simulate_kernel
from .tensor import NkiTensor

__version__ = "0.6.0+sim"

__all__ = [
    "compiler", "isa", "language", "jit", "Kernel", "CompiledKernel", "simulate", "simulate_kernel", "cpu_simulate",
    "baremetal", "benchmark",
    "BenchmarkResult", "Latency", "NkiError", "NkiValidationError", "NkiTensor", "__version__",
    "dtype", "ArrayType", "register_array_type", "unregister_array_type", "registered_array_types",
]
