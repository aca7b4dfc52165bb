"""ProgramBuilder: tile/HBM slicing produces the right access patterns; emit/build validate."""

import os

import numpy as np
import pytest
from helpers import TRN2, execute
from neuron_sim import AccessPatternError, ProgramBuilder, ValidationError, dtypes
from neuron_sim.builder import HbmTensor, Tile
from neuron_sim.isa import DmaCopy, TensorScalar
from neuron_sim.memory.access_pattern import HBM, SBUF
from neuron_sim.program import TensorDecl

ROW_BYTES = 4096


def tile_case(shape, dtype="float32", offset=128, partition_start=0):
    """A tile, the flat SBUF-like buffer it lives in, and the numpy array it holds."""
    rng = np.random.default_rng(0)
    size = dtypes.itemsize(dtype)
    buffer = rng.integers(0, 256, size=128 * ROW_BYTES, dtype=np.uint8)
    tile = Tile(SBUF, dtype, shape, offset, partition_start)
    free = int(np.prod(shape[1:]))
    rows = buffer.reshape(128, ROW_BYTES)[partition_start : partition_start + shape[0], offset : offset + free * size]
    array = np.ascontiguousarray(rows).view(dtypes.to_numpy(dtype)).reshape(shape)
    return tile, buffer, array


def as_rows(x, partitions):
    return np.asarray(x).reshape(partitions, -1)


INDICES = [
    (slice(None),),
    (slice(2, 5),),
    (3,),
    (-1,),
    (slice(None), 2),
    (slice(None), -2),
    (slice(None), slice(1, 4, 2)),
    (slice(None), slice(-3, None)),
    (slice(None), slice(None, -1)),
    (slice(1, 3), slice(None), 4),
    (slice(None), 1, slice(0, 8, 3)),
    (0, 0, 0),
    (Ellipsis, 5),
    (slice(None), Ellipsis),
    (np.int64(2), slice(None), slice(None)),
]


@pytest.mark.parametrize("index", INDICES, ids=repr)
def test_tile_slices_address_what_numpy_slicing_selects(index):
    tile, buffer, array = tile_case((6, 4, 8), partition_start=32)
    ap = tile[index]
    expected = array[index]
    # on chip the partition dim stays, even under an integer index
    first = index[0] if index and index[0] is not Ellipsis else slice(None)
    partitions = 1 if not isinstance(first, slice) else len(range(*first.indices(6)))
    got = ap.view(buffer, ROW_BYTES)
    assert ap.partition_count == partitions and ap.partition_start >= 32
    np.testing.assert_array_equal(as_rows(got, partitions), as_rows(expected, partitions))


@pytest.mark.parametrize("index", INDICES[:12], ids=repr)
def test_hbm_slices_address_what_numpy_slicing_selects(index):
    x = np.arange(6 * 4 * 8, dtype=np.float32).reshape(6, 4, 8)
    t = HbmTensor(TensorDecl("x", x.shape, "float32"))
    ap = t[index]
    assert ap.memory == HBM and ap.tensor == "x"
    ap.check_tensor_bounds(x.nbytes, "test")
    got = ap.view(x.reshape(-1).view(np.uint8), 0)
    np.testing.assert_array_equal(got.reshape(-1), x[index].reshape(-1))


def test_tile_ap_fields():
    tile = Tile(SBUF, "bfloat16", (64, 4, 8), offset=256, partition_start=64)
    ap = tile[10:20, 1, ::2]
    assert (ap.partition_start, ap.partition_count) == (74, 10)
    assert ap.free == ((2, 4),) and ap.offset == 256 + 8 * 2 and ap.dtype == "bfloat16"
    assert tile.ap.free == ((8, 4), (1, 8)) and tile.ap.partition_count == 64
    assert Tile(SBUF, "float32", (4,), 0)[:].free == ((1, 1),)  # a 1-d tile is [P, 1]


def test_hbm_ap_fields():
    t = HbmTensor(TensorDecl("w", (8, 16), "float32"))
    ap = t[2:6, 4:12:2]
    assert (ap.partition_count, ap.partition_stride, ap.free, ap.offset) == (4, 16, ((2, 4),), (2 * 16 + 4) * 4)
    ap = t[3]
    assert ap.partition_count == 1 and ap.free == ((1, 16),) and ap.offset == 3 * 64
    assert HbmTensor(TensorDecl("s", (), "float32")).ap.shape == (1, 1)


@pytest.mark.parametrize(
    "index, rule, value",
    [
        ((slice(None), slice(None), slice(None), 1), "ap.index", "4 indices"),
        ((slice(0, 6, 2),), "ap.partition_stride", "step 1"),
        ((slice(None), slice(None, None, -1)), "ap.index", "-1"),
        ((slice(None), slice(None, None, 0)), "ap.index", "0"),
        ((6,), "ap.bounds", "index 6"),
        ((-7,), "ap.bounds", "index -7"),
        ((slice(None), slice(2, 9)), "ap.bounds", "2:9"),
        ((slice(None), slice(-9, None)), "ap.bounds", "-9"),
        ((slice(None), slice(3, 3)), "ap.bounds", "empty"),
        ((slice(None), 1.5), "ap.index", "1.5"),
        ((slice(None), None), "ap.index", "None"),
        ((Ellipsis, Ellipsis), "ap.index", "Ellipsis"),
        ((slice(None), slice(0.5, 2)), "ap.index", "0.5"),
    ],
    ids=repr,
)
def test_bad_indices(index, rule, value):
    tile, _, _ = tile_case((6, 4, 8))
    with pytest.raises(AccessPatternError) as info:
        tile[index]
    assert info.value.rule == rule and value in str(info.value)


def test_tile_partition_limits():
    b = ProgramBuilder("p", TRN2)
    with pytest.raises(AccessPatternError) as info:
        b.sbuf((129, 4), "float32")
    assert info.value.rule == "partition.limit" and "129" in str(info.value)
    with pytest.raises(AccessPatternError) as info:
        b.sbuf((64, 4), "float32", partition_start=96)
    assert info.value.rule == "partition.limit" and "96" in str(info.value)
    with pytest.raises(AccessPatternError) as info:
        b.psum((0, 4))
    assert info.value.rule == "ap.empty"


def test_emit_records_the_callers_line_and_validates():
    b = ProgramBuilder("p", TRN2)
    x = b.input("x", (4, 8), "float32")
    t = b.sbuf((4, 8), "float32")
    inst = b.emit(DmaCopy(dst=t[:, :], src=x[:, :]))
    assert inst.location.startswith(__file__ + ":") or inst.location.startswith(os.path.basename(__file__))
    with pytest.raises(ValidationError) as info:
        b.emit(TensorScalar(dst=t[:, :4], src=t[:, :], op0="add", operand0=1.0))  # line below names this test
    assert info.value.rule == "shape.free_mismatch" and os.path.basename(__file__) in str(info.value)


def test_caller_location_skips_the_named_packages_by_module_not_by_prefix():
    import sys

    from neuron_sim.builder import caller_location

    def call_from(module_name: str):
        """A function of module ``module_name`` (file /lib/<name>.py) that asks for its caller's line."""
        namespace = {"__name__": module_name, "caller_location": caller_location}
        exec(compile("def call(skip):\n    return caller_location(skip)\n", f"/lib/{module_name}.py", "exec"), namespace)
        return namespace["call"]

    line = sys._getframe().f_lineno
    framework, lookalike = call_from("myframework.ops"), call_from("myframework_tools")
    for _ in range(2):  # the second walk answers from what the first learnt about each module
        assert framework(("myframework",)) == f"{__file__}:{line + 3}"
        assert lookalike(("myframework",)) == "/lib/myframework_tools.py:2"
        assert framework(("other",)) == "/lib/myframework.ops.py:2"


def test_build_release_and_run():
    b = ProgramBuilder("scale", TRN2)
    x = b.input("x", (16, 32), "float32")
    y = b.output("y", (16, 32), "bfloat16")
    t = b.sbuf((16, 32), "float32")
    b.emit(DmaCopy(dst=t[:, :], src=x[:, :]))
    b.emit(TensorScalar(dst=t[:, :], src=t[:, :], op0="multiply", operand0=3.0))
    b.emit(DmaCopy(dst=y[:, :], src=t[:, :]))
    program = b.build(metadata={"k": 1})
    assert [d.name for d in program.inputs] == ["x"] and [d.name for d in program.outputs] == ["y"]
    assert program.metadata == {"k": 1} and program.target == "trn2"
    b.release(t)
    assert b.sbuf((16, 32), "float32").offset == t.offset  # the space is reused
    xs = np.linspace(-1, 1, 16 * 32, dtype=np.float32).reshape(16, 32)
    run = execute(program.instructions, hbm_inputs={"x": xs}, hbm_outputs={"y": ((16, 32), "bfloat16")})
    np.testing.assert_array_equal(run.hbm["y"].astype(np.float32), (xs * np.float32(3.0)).astype(dtypes.to_numpy("bfloat16")).astype(np.float32))
