"""Other import names of nki: ``neuronxcc.nki.X`` and ``nki_cpu_simulator.nki.X`` (the CPU
simulator package nki-library's simulation mode imports) are the very modules ``nki.X``;
``nki.cpu_simulate(kernel)[lnc](**arrays)`` as nki-library's tests call it."""

import importlib

import nki
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import rand

MODULES = ["language", "isa", "isa.constants", "compiler", "typing", "language.dtypes", "tensor", "builtin"]


@pytest.mark.parametrize("prefix", ["neuronxcc.nki", "nki_cpu_simulator.nki"])
@pytest.mark.parametrize("module", MODULES)
def test_other_names_are_the_same_module(prefix, module):
    assert importlib.import_module(f"{prefix}.{module}") is importlib.import_module(f"nki.{module}")


def test_the_simulator_package_is_nki():
    from nki_cpu_simulator import nki as simulator_nki

    assert simulator_nki is nki


@nki.jit
def per_core_rows(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows = x.shape[0] // nl.num_programs()
    i = nl.program_id(0)
    nl.store(out[i * rows:(i + 1) * rows, :], nl.multiply(nl.load(x[i * rows:(i + 1) * rows, :]), 3.0))
    return out


@pytest.mark.parametrize("lnc", [1, 2])
def test_cpu_simulate_runs_the_kernel_with_keyword_arrays_on_lnc_cores(lnc):
    x = rand((256, 8), seed=13) if lnc == 2 else rand((128, 8), seed=13)
    np.testing.assert_array_equal(nki.cpu_simulate(per_core_rows)[lnc](x=x), 3 * x)
    assert len(per_core_rows.last_timing) == lnc
