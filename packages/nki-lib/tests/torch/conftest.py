import os
import tempfile
import warnings

import pytest

# NEFFs of this test session go to a cache of its own (every run compiles what it tests, as a
# clean CI machine does), set before torch_neuronx is imported.
os.environ.setdefault("TORCH_NEURONX_NEFF_CACHE_DIR", tempfile.mkdtemp(prefix="nkilib-test-neff-"))

import torch  # noqa: E402
import torch_neuronx  # noqa: E402
from nkilib.torch import _support  # noqa: E402
from torch_neuronx.dynamo import NeuronCompileFallbackWarning  # noqa: E402
from torch_neuronx.ops.tracking import NeuronFallbackWarning  # noqa: E402


@pytest.fixture(autouse=True)
def settled_device():
    """Each test starts with a settled device, no op records and no fallback warned yet (the
    once-per-shape warnings are part of what is tested)."""
    warnings.simplefilter("ignore", NeuronFallbackWarning)
    torch.neuron.synchronize()
    torch_neuronx.clear_op_tracking()
    _support._warned.clear()
    yield
    torch.neuron.synchronize()


@pytest.fixture
def strict():
    """No compiled graph may fall back to eager: the compiled path is what is tested."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", NeuronCompileFallbackWarning)
        yield
