"""nki.simulate and the legacy entry points (simulate_kernel, baremetal)."""

from __future__ import annotations

import os

from .benchmarking import benchmark
from .kernel import Kernel, jit


def simulate(kernel):
    """A callable running ``kernel`` on the simulator: numpy arrays in and out (inputs the kernel
    writes are updated in place), or the arrays of a registered framework (torch tensors, with
    torch-neuronx), which its integration converts or binds. Every kernel runs on the simulator
    here, so this is the kernel itself; plain functions are jit-decorated first."""
    return kernel if isinstance(kernel, Kernel) else jit(kernel)


def simulate_kernel(kernel, *args, **kwargs):
    """Legacy ``neuronxcc.nki.simulate_kernel(kernel, *args)``."""
    return simulate(kernel)(*args, **kwargs)


def cpu_simulate(kernel):
    """``nki.cpu_simulate(kernel)`` as nki-library's tests call it: ``cpu_simulate(k)(**args)``
    runs one logical core, ``cpu_simulate(k)[2](**args)`` LNC=2 - the simulated kernel itself."""
    return simulate(kernel)


def baremetal(kernel=None, save_neff_name=None, save_trace_name=None, additional_compile_opt=None, artifacts_dir=None):
    """Legacy ``nki.baremetal``: one launch with numpy arrays; ``save_neff_name`` and
    ``save_trace_name`` write its NEFF and a trace of the launch (relative names inside
    ``artifacts_dir`` when given)."""

    def place(name):
        return os.path.join(artifacts_dir, name) if name and artifacts_dir else name

    return benchmark(kernel, warmup=0, iters=1, save_neff_name=place(save_neff_name), save_trace_name=place(save_trace_name),
                     additional_compile_opt=additional_compile_opt)
