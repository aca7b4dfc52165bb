"""Property-based fuzzing of access patterns and builder slicing.

Every input either builds a pattern or raises an AccessPatternError (a NeuronSimError); the
static bounds check agrees with what can actually be viewed; views address exactly the elements
index arithmetic says; serialization round-trips.
"""

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from neuron_sim import AccessPatternError, NeuronSimError, dtypes
from neuron_sim.builder import HbmTensor, Tile
from neuron_sim.memory import OnChipMemory
from neuron_sim.memory.access_pattern import HBM, AccessPattern
from neuron_sim.program import TensorDecl

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DTYPES = ["float32", "bfloat16", "float8_e5m2", "int16", "uint8", "int32", "float16"]
PARTITIONS, ROW_BYTES = 8, 256


def element_addresses(ap: AccessPattern, row_bytes: int) -> list[int]:
    """Byte address of each addressed element, row-major, by explicit arithmetic."""
    size = ap.itemsize
    out = []
    for p in range(ap.partition_count):
        base = ap.offset + (p * ap.partition_stride * size if ap.memory == HBM else (ap.partition_start + p) * row_bytes)
        for idx in np.ndindex(*[c for _, c in ap.free]):
            out.append(base + sum(i * s * size for i, (s, _) in zip(idx, ap.free)))
    return out


def gather(buffer: np.ndarray, addresses, dtype) -> np.ndarray:
    size = dtypes.itemsize(dtype)
    raw = np.concatenate([buffer[a : a + size] for a in addresses]) if addresses else np.zeros(0, np.uint8)
    return raw.view(dtypes.to_numpy(dtype))


free_dims = st.lists(st.tuples(st.integers(-40, 40), st.integers(-1, 6)), min_size=0, max_size=5)


@SETTINGS
@given(
    memory=st.sampled_from(["sbuf", "psum", "hbm", "dram"]),
    dtype=st.sampled_from(DTYPES + ["complex64"]),
    start=st.integers(-2, 10),
    count=st.integers(-1, 10),
    free=free_dims,
    offset=st.integers(-8, 300),
    stride0=st.integers(-4, 40),
)
def test_random_patterns_build_or_fail_cleanly(memory, dtype, start, count, free, offset, stride0):
    kwargs = dict(memory=memory, dtype=dtype, partition_start=start, partition_count=count, free=tuple(free), offset=offset)
    if memory == HBM:
        kwargs.update(tensor="t", partition_stride=stride0)
    try:
        ap = AccessPattern(**kwargs)
    except NeuronSimError as err:
        assert getattr(err, "rule", "")  # every refusal names its rule
        return
    assert AccessPattern.from_dict(ap.to_dict()) == ap
    buffer = np.random.default_rng(abs(hash((start, count, offset))) % 2**32).integers(0, 256, PARTITIONS * ROW_BYTES, dtype=np.uint8)
    if ap.memory == HBM:
        try:
            ap.check_tensor_bounds(buffer.nbytes, "fuzz")
            static_ok = True
        except AccessPatternError:
            static_ok = False
        row_bytes = 0
    else:
        try:
            ap.check_bounds(PARTITIONS, ROW_BYTES, "fuzz")
            static_ok = True
        except AccessPatternError:
            static_ok = False
        row_bytes = ROW_BYTES
    try:
        view = ap.view(buffer, row_bytes)
    except AccessPatternError:
        assert not static_ok, "the static check passed but the view was refused"
        return
    assert static_ok, "the static check refused a pattern that can be viewed"
    expected = gather(buffer, element_addresses(ap, row_bytes), ap.dtype)
    assert np.array_equal(np.ascontiguousarray(view).reshape(-1).view(np.uint8), expected.view(np.uint8))


@SETTINGS
@given(
    dtype=st.sampled_from(DTYPES),
    start=st.integers(0, PARTITIONS - 1),
    count=st.integers(1, PARTITIONS),
    free=st.lists(st.tuples(st.integers(-6, 12), st.integers(1, 5)), min_size=1, max_size=4),
    offset=st.integers(0, ROW_BYTES),
    dyn=st.integers(-64, 64),
)
def test_shadow_mask_tracks_exactly_the_written_bytes(dtype, start, count, free, offset, dyn):
    try:
        ap = AccessPattern("sbuf", dtype, start, count, tuple(free), offset)
        ap.check_bounds(PARTITIONS, ROW_BYTES, "fuzz")
    except AccessPatternError:
        return
    mem = OnChipMemory("SBUF", PARTITIONS, ROW_BYTES, track_writes=True)
    try:
        mem.view(ap, dyn)  # a run-time offset: either stays inside each partition or is refused
    except AccessPatternError:
        lo, hi = ap.free_byte_span()
        assert lo + dyn < 0 or hi + dyn > ROW_BYTES
        return
    mem.mark_written(ap, dyn)
    mem.check_initialized(ap, dyn)
    touched = set()
    for a in element_addresses(ap, ROW_BYTES):
        touched.update(range(a + dyn, a + dyn + ap.itemsize))
    assert int(mem.written.sum()) == len(touched)
    assert all(mem.written.reshape(-1)[a] for a in touched)


def _index_strategy(shape):
    def one(dim):
        bound = st.integers(-dim - 2, dim + 2)
        return st.one_of(
            bound,
            st.builds(slice, st.none() | bound, st.none() | bound, st.none() | st.integers(-2, 3)),
        )

    return st.tuples(*[one(d) for d in shape]).flatmap(lambda t: st.integers(0, len(t)).map(lambda n: t[:n]))


@st.composite
def shape_and_index(draw):
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=4)))
    return shape, draw(_index_strategy(shape))


def _in_range(index, shape, partition_dim_on_chip):
    """Indices numpy and the builder both accept; returns the selection's size, or None."""
    for d, (idx, dim) in enumerate(zip(index, shape)):
        if isinstance(idx, slice):
            if idx.step is not None and idx.step <= 0:
                return None
            if partition_dim_on_chip and d == 0 and idx.step not in (None, 1):
                return None
            for b in (idx.start, idx.stop):
                if b is not None and not -dim <= b <= dim:
                    return None
            if len(range(*idx.indices(dim))) == 0:
                return None
        elif not -dim <= idx < dim:
            return None
    return True


@SETTINGS
@given(shape_and_index(), st.sampled_from(DTYPES))
def test_tile_slicing_is_numpy_slicing_or_a_clean_error(case, dtype):
    shape, index = case
    assume(len(shape) <= 5)
    tile = Tile("sbuf", dtype, shape, offset=8)
    try:
        ap = tile[index]
    except AccessPatternError:
        assert _in_range(index, shape, True) is None, f"refused a valid index {index} for {shape}"
        return
    assert _in_range(index, shape, True), f"accepted an invalid index {index} for {shape}"
    size = dtypes.itemsize(dtype)
    free = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    row_bytes = 8 + free * size
    buffer = np.arange(shape[0] * row_bytes, dtype=np.int64).astype(np.uint8)
    array = buffer.reshape(shape[0], row_bytes)[:, 8:].copy().view(dtypes.to_numpy(dtype)).reshape(shape)
    expected = array[index]
    first = index[0] if index else slice(None)
    partitions = len(range(*first.indices(shape[0]))) if isinstance(first, slice) else 1
    got = ap.view(buffer, row_bytes)
    assert got.shape[0] == partitions
    assert np.array_equal(np.ascontiguousarray(got).reshape(partitions, -1).view(np.uint8), np.ascontiguousarray(expected).reshape(partitions, -1).view(np.uint8))


@SETTINGS
@given(shape_and_index())
def test_hbm_slicing_is_numpy_slicing_or_a_clean_error(case):
    shape, index = case
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    t = HbmTensor(TensorDecl("x", shape, "int32"))
    try:
        ap = t[index]
    except AccessPatternError:
        assert _in_range(index, shape, False) is None, f"refused a valid index {index} for {shape}"
        return
    except NeuronSimError:
        # more than 5 kept dims cannot be described; anything else is a bug
        assert len(shape) > 5
        return
    assert _in_range(index, shape, False)
    ap.check_tensor_bounds(x.nbytes, "fuzz")
    np.testing.assert_array_equal(ap.view(x.reshape(-1).view(np.uint8), 0).reshape(-1), x[index].reshape(-1))
