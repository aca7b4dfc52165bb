"""The backend is found by name through the torch_dynamo_backends entry point, without importing
torch_neuronx first; set_default_backend works; the padding helper pads to buckets."""

from __future__ import annotations

import pytest
import torch
from tnx_helpers import run_python
from torch_neuronx.dynamo import bucket_for, pad_to_bucket


def test_listed_and_usable_by_name_without_importing_torch_neuronx():
    out = run_python(
        "import sys, torch\n"
        "names = torch.compiler.list_backends()\n"
        "assert 'neuron' in names, names\n"
        "torch.compiler.set_default_backend('neuron')\n"
        "f = torch.compile(lambda a: (a * 2).sum())\n"
        "print(f(torch.ones(3, 4).to('neuron')).item())\n",
        env={"TORCH_NEURONX_COMPILE_LOG": "0"}, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "24.0"


def test_pad_to_bucket():
    x = torch.arange(10).reshape(2, 5)
    padded, n = pad_to_bucket(x, buckets=(4, 8, 16), dim=1, value=-1)
    assert n == 5 and padded.shape == (2, 8)
    assert padded[:, :5].equal(x) and (padded[:, 5:] == -1).all()
    same, n = pad_to_bucket(x, buckets=(5,), dim=1)
    assert same is x and n == 5
    assert bucket_for(3, (8, 2, 4)) == 4
    with pytest.raises(ValueError, match="largest bucket 8"):
        bucket_for(9, (2, 4, 8))
