"""``inspect`` reports the header, the tensor table and instruction counts per engine."""

from __future__ import annotations

import pytest
from neuron_sim.errors import NeffFormatError
from neuron_sim.neff import NEFF_VERSION, inspect


def test_inspect_bytes(neff, neff_bytes):
    info = inspect(neff_bytes)
    assert info["format"] == "neuron-sim-neff"
    assert info["version"] == NEFF_VERSION
    assert info["producer"].startswith("neuron-sim ")
    assert info["program"] == "matmul_256x256x512_bfloat16"
    assert info["target"] == "trn2"
    assert {"python", "numpy"} <= set(info["created_by"])
    assert [t["name"] for t in info["tensors"]] == ["lhsT", "rhs", "out"]
    assert info["tensors"][2] == {"name": "out", "shape": [256, 512], "dtype": "bfloat16", "kind": "output"}
    assert [s["name"] for s in info["sections"]] == ["program", "graph", "timing_summary", "metadata"]
    assert info["file_size"] == len(neff_bytes)
    assert len(info["sha256"]) == 64


def test_instruction_counts_put_dmas_under_dma(neff_bytes):
    # 256x256x512: 2 rhs loads + 2x2 lhs loads + 2 stores = 8 DMAs; 2x2 matmuls; evacuation
    # alternates VectorE (TensorCopy) and ScalarE (Activation).
    info = inspect(neff_bytes)
    assert info["instruction_counts"] == {"dma": 8, "scalar": 1, "tensor": 4, "vector": 1}
    assert info["num_instructions"] == 14


def test_inspect_path_matches_bytes(neff, neff_bytes, tmp_path):
    path = tmp_path / "m.neff"
    neff.save(path)
    assert inspect(path) == inspect(neff_bytes)
    assert inspect(str(path)) == inspect(neff_bytes)


def test_inspect_refuses_a_foreign_file(tmp_path):
    path = tmp_path / "image.neff"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    with pytest.raises(NeffFormatError, match="image.neff.*PNG"):
        inspect(path)
