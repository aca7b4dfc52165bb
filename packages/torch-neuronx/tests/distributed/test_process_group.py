"""Creating the neuron process group: the three ways of the brief, the registration, and the
errors before and instead of a group."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch_neuronx  # noqa: F401  (registers the backend)


def test_neuron_is_the_default_backend_of_the_neuron_device():
    assert dist.Backend.default_device_backend_map["neuron"] == "neuron"
    assert dist.Backend.backend_capability["neuron"] == ["neuron"]
    assert torch._C._get_accelerator().type == "neuron"  # what init_process_group() with no backend asks


def test_init_no_argument_named_and_per_device(ranks):
    runs = ranks("init_variants")
    assert all(r.returncode == 0 and r.result is not None for r in runs), runs.describe()
    for r in runs:
        assert r.result["failed"] == {}, r.result["failed"]
        assert r.result["passed"] == ["init_process_group()", "init_process_group('neuron')",
                                      "init_process_group('cpu:gloo,neuron:neuron')"]


def test_collective_before_init_process_group_names_the_rule():
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.all_reduce(torch.ones(2, device="neuron"))


@pytest.mark.parametrize("backend", ["nosuchccl", "neuron:nosuchccl"])
def test_unknown_backend_is_refused(tmp_path, backend):
    # torch's own error, naming the backend
    with pytest.raises(AssertionError, match="(?i)unknown (c10d )?backend type nosuchccl"):
        dist.init_process_group(backend, init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    assert not dist.is_initialized()
