"""Bad input and failures across ranks: clear errors on every rank, never a hang or garbage."""

from __future__ import annotations


def test_mismatched_shapes_dtypes_devices_are_errors_on_every_rank(ranks):
    runs = ranks("bad_input")
    assert all(r.returncode == 0 and r.result is not None for r in runs), runs.describe()
    for r in runs:
        other = 1 - r.rank
        got = r.result
        assert got["numel"].startswith("ValueError: neuron process group: all_reduce needs the same dtype and shape on "
                                       "every rank"), got["numel"]
        mine, theirs = ("[4]", "[6]") if r.rank == 0 else ("[6]", "[4]")
        assert f"rank {r.rank} has float32 {mine}, rank {other} has float32 {theirs}" in got["numel"]
        assert "broadcast needs the same dtype and shape" in got["dtype"] and "int64 [4]" in got["dtype"]
        assert "all_gather_into_tensor needs the same dtype and shape" in got["gather shape"]
        assert "does not mix devices" in got["mixed devices"] and "['cpu', 'neuron:0']" in got["mixed devices"]
        assert "PREMUL_SUM is not supported" in got["premul_sum"]
        assert got["after"] == [3.0, 3.0, 3.0, 3.0]  # the group still works after refusing those


def test_a_peer_that_exits_is_an_error_not_a_hang(ranks):
    # the process-group timeout (20 s) bounds every wait; run_ranks fails the test on a hang
    runs = ranks("peer_exits", timeout=240, env={"RANKS_PG_TIMEOUT": "20"})
    survivor, exited = runs
    assert exited.returncode == 7, runs.describe()
    assert survivor.returncode == 0 and survivor.result is not None, runs.describe()
    got = survivor.result
    # mid-collective (the peer died while rank 0 waited), then at the shape check, then again
    assert got["unchecked"].startswith("RuntimeError: neuron process group: all_reduce on rank 0 of 2 failed: "), got
    assert got["checked"].startswith("RuntimeError: neuron process group: all_reduce on rank 0 of 2 failed while the "
                                     "ranks compared shapes"), got
    assert got["again"].startswith("RuntimeError: neuron process group: all_reduce on rank 0 of 2 failed"), got
    assert got["synchronize"] == "no error"  # the error was the caller's; the stream is not poisoned
