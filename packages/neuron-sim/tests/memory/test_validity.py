"""Invalid byte ranges of an allocation: marked with a cause, cut by valid writes, forgotten."""

from neuron_sim.memory.validity import INVALID, InvalidRanges


def test_ranges_are_cut_by_writes_and_overwritten_by_newer_causes():
    r = InvalidRanges()
    before = INVALID.count
    r.mark_invalid(1000, 1000, 1100, "a")
    r.mark_invalid(1000, 1050, 1200, "b")  # the newer cause wins where they overlap
    assert r.ranges(1000) == [(1000, 1050), (1050, 1200)]
    assert r.find(1000, 1040, 1060) == ("a", 1000, 1050)
    assert r.find(1000, 1060, 1061) == ("b", 1050, 1200)
    r.mark_valid(1000, 1020, 1080)  # a write in the middle splits what is left
    assert r.ranges(1000) == [(1000, 1020), (1080, 1200)]
    assert r.find(1000, 1020, 1080) is None
    assert INVALID.count == before + 2
    r.mark_valid(1000, 0, 10**6)
    assert not r and r.ranges(1000) == [] and INVALID.count == before


def test_forget_drops_an_allocation_and_empty_ranges_are_nothing():
    r = InvalidRanges()
    before = INVALID.count
    r.mark_invalid(64, 64, 64, "empty")
    assert not r
    r.mark_invalid(64, 64, 128, "x")
    r.mark_invalid(4096, 4096, 4100, "y")
    r.forget(64)
    assert r.ranges(64) == [] and r.find(4096, 4096, 4097)[0] == "y"
    r.forget(4096)
    assert INVALID.count == before
