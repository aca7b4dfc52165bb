"""nki.simulate and the legacy entry points (simulate_kernel, baremetal)."""

from __future__ import annotations

from neuron_sim.neff import Neff

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


def baremetal(kernel=None, save_neff_name=None, save_trace_name=None, additional_compile_opt=None, artifacts_dir=None):
    """Legacy ``nki.baremetal``: run with numpy arrays; ``save_neff_name`` writes the kernel's NEFF."""

    def wrap(fn):
        k = fn if isinstance(fn, Kernel) else jit(fn)

        def run(*args, **kwargs):
            result = simulate(k)(*args, **kwargs)
            if save_neff_name:
                compiled = k.compile(args, kwargs)
                Neff(compiled.programs[0], k.last_timing[0].summary).save(save_neff_name)  # this run's timing
            return result

        return run

    return wrap if kernel is None else wrap(kernel)
