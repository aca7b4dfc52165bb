"""FSDP2 (``fully_shard``) of a small model on a neuron DeviceMesh, 2 ranks, against one process
on the whole batch (CPU), with no patches to PyTorch."""

from __future__ import annotations

import math


def test_fully_shard_matches_a_single_process_reference(ranks):
    runs = ranks("fsdp2")
    assert all(r.returncode == 0 and r.result is not None for r in runs), runs.describe()
    for r in runs:
        got = r.result
        assert set(got["param_types"]) == {"DTensor"}, got["param_types"]  # really sharded
        for step, (loss, want) in enumerate(zip(got["losses"], got["reference"])):
            assert math.isclose(loss, want, rel_tol=1e-5), f"rank {r.rank} step {step}: loss {loss}, reference {want}"
        assert len(got["losses"]) == 3
        assert got["max_param_diff"] < 1e-5, got["max_param_diff"]
