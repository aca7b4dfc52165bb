"""DistributedDataParallel of a small model on neuron, 2 ranks, against one process on the whole
batch (CPU): the same losses and parameters, identical on both ranks."""

from __future__ import annotations

import math


def test_ddp_matches_a_single_process_reference(ranks):
    runs = ranks("ddp")
    assert all(r.returncode == 0 and r.result is not None for r in runs), runs.describe()
    for r in runs:
        got = r.result
        assert len(got["losses"]) == len(got["reference"]) == 3
        for step, (loss, want) in enumerate(zip(got["losses"], got["reference"])):
            assert math.isclose(loss, want, rel_tol=1e-5), f"rank {r.rank} step {step}: loss {loss}, reference {want}"
        assert got["same_on_all_ranks"], "DDP left different parameters on the ranks"
        assert got["max_param_diff"] < 1e-5, got["max_param_diff"]
    assert runs[0].result["losses"] == runs[1].result["losses"]
