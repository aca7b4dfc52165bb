"""Search instructions: max8, find_index8, match_replace8 (VectorE), sequence_bounds (GpSimd) -
against numpy references written from the SDK's nki.isa docs."""

import numpy as np
import pytest
from helpers import TRN2, execute, sb
from neuron_sim import ValidationError
from neuron_sim.isa import FindIndex8, MatchReplace8, Max8, SequenceBounds

RNG = np.random.default_rng(12)


@pytest.mark.parametrize("cols", [8, 9, 300])
def test_max8_gives_the_eight_largest_descending(cols):
    x = RNG.standard_normal((32, cols)).astype(np.float32)
    src, dst = sb("float32", 32, cols), sb("float32", 32, 8, offset=2048)
    run = execute([Max8(dst=dst, src=src)], preload=[(src, x)], fetch=[dst])
    np.testing.assert_array_equal(run[0], np.sort(x, axis=1)[:, ::-1][:, :8])


def test_find_index8_first_occurrences_duplicates_ascending_and_absent_values():
    data = np.array([[5, 1, 5, 2, 5, 3, 4, 7, 9, 0]], dtype=np.float32)
    vals = np.array([[5, 5, 4, 42, 9, 5, 1, 5]], dtype=np.float32)  # the 4th 5 does not exist
    d, v, dst = sb("float32", 1, 10), sb("float32", 1, 8, offset=64), sb("uint32", 1, 8, offset=128)
    run = execute([FindIndex8(dst=dst, data=d, vals=v)], preload=[(d, data), (v, vals)], fetch=[dst])
    none = np.iinfo(np.uint32).max
    assert run[0].tolist() == [[0, 2, 6, none, 8, 4, 1, none]]


def test_match_replace8_replaces_and_pairs_duplicates_in_reverse():
    """The docs' example: data [1, 2, 3, 4, 8 x 7], vals [3, 8 x 7] -> dst_idx [2, 10, 9, ..., 4]."""
    data = np.array([[1, 2, 3, 4] + [8] * 7], dtype=np.float32)
    vals = np.array([[3] + [8] * 7], dtype=np.float32)
    d, v = sb("float32", 1, 11), sb("float32", 1, 8, offset=64)
    dst, idx = sb("float32", 1, 11, offset=128), sb("int32", 1, 8, offset=256)
    run = execute([MatchReplace8(dst=dst, data=d, vals=v, imm=-1.0, dst_idx=idx)], preload=[(d, data), (v, vals)],
                  fetch=[dst, idx])
    assert run[0].tolist() == [[1, 2, -1, 4] + [-1] * 7]
    assert run[1].tolist() == [[2, 10, 9, 8, 7, 6, 5, 4]]


def test_match_replace8_is_max8_then_replace_across_partitions():
    """The usual top-k step: the 8 maxima of each row replaced by -inf."""
    x = RNG.standard_normal((16, 40)).astype(np.float32)
    d, m, dst = sb("float32", 16, 40), sb("float32", 16, 8, offset=512), sb("float32", 16, 40, offset=1024)
    run = execute([Max8(dst=m, src=d), MatchReplace8(dst=dst, data=d, vals=m, imm=float("-inf"))], preload=[(d, x)],
                  fetch=[dst])
    expected = x.copy()
    top = np.argsort(-x, axis=1)[:, :8]
    np.put_along_axis(expected, top, -np.inf, axis=1)
    np.testing.assert_array_equal(run[0], expected)


def test_sequence_bounds_of_segments_and_padding():
    ids = np.array([[1, 1, 2, 2, 2, 0, 3, 0, 0, 4]], dtype=np.int32)
    s, dst = sb("int32", 1, 10), sb("int32", 1, 20, offset=64)
    run = execute([SequenceBounds(dst=dst, segment_ids=s)], preload=[(s, ids)], fetch=[dst])
    starts, ends = run[0].reshape(2, 10)
    assert starts.tolist() == [0, 0, 2, 2, 2, 10, 6, 10, 10, 9]  # padding (id 0): n
    assert ends.tolist() == [2, 2, 5, 5, 5, -1, 7, -1, -1, 10]  # one past the segment's last index; padding: -1


@pytest.mark.parametrize(
    "inst, rule",
    [
        (Max8(dst=sb("float32", 8, 8), src=sb("float32", 8, 7, offset=64)), "search.size"),
        (Max8(dst=sb("float32", 8, 4), src=sb("float32", 8, 16, offset=64)), "search.dst_shape"),
        (FindIndex8(dst=sb("float32", 8, 8), data=sb("float32", 8, 16, offset=64), vals=sb("float32", 8, 8, offset=256)),
         "search.index_dtype"),
        (FindIndex8(dst=sb("uint32", 8, 8), data=sb("float32", 8, 16, offset=64), vals=sb("float32", 8, 4, offset=256)),
         "search.vals"),
        (SequenceBounds(dst=sb("int32", 2, 8), segment_ids=sb("int32", 2, 4, offset=64)), "sequence_bounds.partitions"),
        (SequenceBounds(dst=sb("int32", 1, 6), segment_ids=sb("int32", 1, 4, offset=64)), "sequence_bounds.dst_shape"),
        (SequenceBounds(dst=sb("int32", 1, 8), segment_ids=sb("bfloat16", 1, 4, offset=64)), "sequence_bounds.dtype"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_search_rules(inst, rule):
    with pytest.raises(ValidationError) as info:
        inst.validate(TRN2)
    assert info.value.rule == rule
