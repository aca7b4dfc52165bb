"""Shared fixtures of the torch-neuronx tests.

Every test starts and ends with a settled device: the autouse fixture synchronizes (so an error
a test left queued cannot surface in the next one) and clears op tracking. Anything that needs
other environment variables or a fresh interpreter runs in a subprocess (``tnx_helpers.run_python``).
"""

from __future__ import annotations

import os
import sys
import warnings

import pytest
import torch

# Make ``tnx_helpers`` importable from every test folder (--import-mode=importlib
# puts no test folder on sys.path). ``tnx_helpers`` is a name unique across the monorepo.
sys.path.insert(0, os.path.dirname(__file__))

# Compiled ops go to a cache of this test session, not the user's: every run compiles what it
# tests (as a clean CI machine does) and never reads NEFFs another version left behind.
if "TORCH_NEURONX_NEFF_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = tempfile.mkdtemp(prefix="tnx-test-neff-")

import torch_neuronx  # noqa: E402
from torch_neuronx.ops.tracking import NeuronFallbackWarning  # noqa: E402


@pytest.fixture(autouse=True)
def settled_device():
    warnings.simplefilter("ignore", NeuronFallbackWarning)
    _settle()
    torch_neuronx.clear_op_tracking()
    yield
    _settle()
    torch_neuronx.clear_op_tracking()
    torch.neuron.set_device(0)


@pytest.fixture
def fallback_only(monkeypatch):
    """Every op through the CPU fallback (tests of the fallback machinery itself)."""
    from torch_neuronx.compiled.dispatch import BACKEND_ENV

    monkeypatch.setenv(BACKEND_ENV, "fallback")


def _settle() -> None:
    try:
        torch.neuron.synchronize()
    except RuntimeError:
        pass  # a kept launch error a test chose not to collect


@pytest.fixture
def neuron() -> torch.device:
    return torch.device("neuron", 0)
