"""Every c10d collective on neuron tensors against the same collective on CPU tensors (gloo) and
against the value each rank computes alone, for float32 / bfloat16 / int64, in 2 processes."""

from __future__ import annotations


def test_every_collective_matches_gloo_on_cpu(ranks):
    runs = ranks("collectives")
    assert all(r.returncode == 0 and r.result is not None for r in runs), runs.describe()
    for r in runs:
        assert r.result["failed"] == {}, f"rank {r.rank}: " + "\n".join(f"{k}:\n{v}" for k, v in r.result["failed"].items())
    passed = runs[0].result["passed"]
    for dtype in ("float32", "bfloat16", "int64"):
        for name in ("all_reduce SUM", "all_reduce AVG", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
                     "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather", "scatter",
                     "send/recv", "recv any source", "isend/irecv", "batch_isend_irecv", "all_reduce async_op", "functional collectives"):
            assert f"{name} {dtype}" in passed
    assert "all_reduce BXOR int64" in passed
    for name in ("stream order", "coalescing manager", "all_reduce takes the modelled device time", "barrier", "new_group", "object collectives",
                 "non-contiguous tensors"):
        assert name in passed
    assert runs[1].result["passed"] == passed
