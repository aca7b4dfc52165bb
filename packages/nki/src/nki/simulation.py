"""nki.simulate and the legacy entry points (simulate_kernel, baremetal)."""

from __future__ import annotations

import numpy as np

from .kernel import Kernel, jit


def _to_numpy(value):
    if type(value).__module__.startswith("torch") and hasattr(value, "numpy"):
        if value.device.type != "cpu":
            value = value.cpu()
        return value.detach().numpy(), True
    return value, False


def _from_numpy(value, as_torch: bool):
    if not as_torch or value is None:
        return value
    import torch

    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    return type(value)(_from_numpy(v, True) for v in value)


def simulate(kernel):
    """A callable running ``kernel`` on the simulator with numpy arrays (or CPU torch tensors,
    converted both ways). Inputs the kernel writes are updated in place."""
    k = kernel if isinstance(kernel, Kernel) else jit(kernel)

    def run(*args, **kwargs):
        converted = [_to_numpy(a) for a in args]
        kw = {key: _to_numpy(v) for key, v in kwargs.items()}
        any_torch = any(t for _, t in converted) or any(t for _, t in kw.values())
        np_args = [a for a, _ in converted]
        np_kwargs = {key: v for key, (v, _) in kw.items()}
        from .execution import run as execute

        result = execute(k, np_args, np_kwargs)
        if any_torch:  # write back inputs updated in place
            for (arr, was_torch), original in zip(converted, args):
                if was_torch and original.device.type == "cpu":
                    original.copy_(_from_numpy(arr, True))
        return _from_numpy(result, any_torch)

    return run


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
                from neuron_sim.neff import Neff

                compiled = k.compile(args, kwargs)
                Neff(compiled.programs[0], k.last_timing[0].summary).save(save_neff_name)  # this run's timing
            return result

        return run

    return wrap if kernel is None else wrap(kernel)
