"""Kernels the real compiler rejects for a hardware rule are rejected here at trace time, with
the rule id, the offending value and the kernel line (file:line) in the message.

Each case is a small kernel whose offending statement carries a ``# marker`` comment; the test
looks the marker up in this file, so moving code around never breaks the line check.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki import NkiValidationError
from nki_helpers import check_error


def _launch(body, *shapes):
    """Run ``body(*hbm_args)`` as a kernel that returns a (written) output."""

    @nki.jit
    def kernel(x, *more):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        body(x, *more)
        zero = nl.zeros((128, 4), nl.float32)
        nl.store(out, zero)
        return out

    arrays = [np.zeros(s, np.float32) for s in (shapes or [(128, 512)])]
    with pytest.raises(NkiValidationError) as info:
        kernel(*arrays)
    return info.value


# --- partition dimension ------------------------------------------------------------------------
def partition_256_sbuf(x):
    nl.ndarray((256, 64), nl.float32, buffer=nl.sbuf)  # partition-256


def partition_load_of_256_rows(x):
    nl.load(x)  # partition-load


def partition_psum_200(x):
    nl.ndarray((200, 512), nl.float32, buffer=nl.psum)  # partition-psum


# --- TensorE: K/M/N limits and PSUM banks --------------------------------------------------------
def matmul_moving_1024(x):
    a = nl.zeros((128, 128), nl.bfloat16)
    b = nl.zeros((128, 1024), nl.bfloat16)
    p = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=a, moving=b)  # moving-n


def matmul_stationary_256(x):
    a = nl.zeros((128, 256), nl.bfloat16)
    b = nl.zeros((128, 512), nl.bfloat16)
    p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=a, moving=b)  # stationary-m


def matmul_k_mismatch(x):
    a = nl.zeros((128, 128), nl.bfloat16)
    b = nl.zeros((64, 512), nl.bfloat16)
    p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=a, moving=b)  # k-mismatch


def matmul_crosses_bank(x):
    a = nl.zeros((128, 128), nl.bfloat16)
    b = nl.zeros((128, 512), nl.bfloat16)
    p = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p[:, 256:768], stationary=a, moving=b)  # bank


def matmul_dst_shape(x):
    a = nl.zeros((128, 64), nl.bfloat16)
    b = nl.zeros((128, 256), nl.bfloat16)
    p = nl.ndarray((128, 256), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=a, moving=b)  # dst-shape


def nl_matmul_k_mismatch(x):
    a = nl.zeros((128, 64), nl.float32)
    b = nl.zeros((32, 128), nl.float32)
    nl.matmul(a, b, transpose_x=True)  # nl-matmul-k


def transpose_too_big(x):
    a = nl.zeros((128, 256), nl.float32)
    p = nl.ndarray((128, 256), nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=p, data=a)  # transpose-size


def vector_transpose_too_big(x):
    a = nl.zeros((64, 64), nl.float32)
    b = nl.ndarray((64, 64), nl.float32, buffer=nl.sbuf)
    nisa.nc_transpose(dst=b, data=a, engine=nisa.vector_engine)  # vector-transpose


# --- engines and memories ------------------------------------------------------------------------
def tensor_engine_reads_psum(x):
    a = nl.zeros((128, 128), nl.float32)
    p = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
    q = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=q, stationary=a, moving=p)  # te-psum


def tensor_engine_writes_sbuf(x):
    a = nl.zeros((128, 128), nl.float32)
    s = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
    nisa.nc_matmul(dst=s, stationary=a, moving=a)  # te-sbuf


def gpsimd_reads_psum(x):
    p = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    s = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=p, engine=nisa.gpsimd_engine)  # gpsimd-psum


def dma_writes_psum(x):
    p = nl.ndarray((128, 4), nl.float32, buffer=nl.psum)
    nisa.dma_copy(dst=p, src=x[:, 0:4])  # dma-psum


def vector_reads_hbm(x):
    a = nl.zeros((128, 4), nl.float32)
    nisa.tensor_tensor(dst=a, data1=x[:, 0:4], data2=a, op=nl.add)  # vector-hbm


def both_inputs_in_psum(x):
    p = nl.zeros((128, 4), nl.float32, buffer=nl.psum)
    a = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=a, data1=p, data2=p, op=nl.add)  # both-psum


def partition_start_off_quadrant(x):
    a = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=a[16:48, :], value=0.0)  # quadrant


def partition_mismatch(x):
    a = nl.zeros((128, 4), nl.float32)
    b = nl.ndarray((64, 4), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=b, src=a)  # partition-mismatch


def free_size_mismatch(x):
    a = nl.zeros((128, 4), nl.float32)
    b = nl.zeros((128, 8), nl.float32)
    nisa.tensor_tensor(dst=a, data1=a, data2=b, op=nl.add)  # free-mismatch


def reduce_non_trailing_axis(x):
    a = nl.zeros((128, 4, 8), nl.float32)
    d = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=d, op=nl.add, data=a, axis=1)  # reduce-axis


def bn_stats_too_wide(x):
    a = nl.zeros((128, 1024), nl.float32)
    d = nl.ndarray((128, 6), nl.float32, buffer=nl.sbuf)
    nisa.bn_stats(dst=d, data=a)  # bn-stats


def activation_not_a_function(x):
    a = nl.zeros((128, 64), nl.float32)
    nisa.activation(dst=a, op=nl.add, data=a)  # act-op


# --- dtypes -------------------------------------------------------------------------------------
def matmul_fp32_with_bf16(x):
    a = nl.zeros((128, 128), nl.float32)
    b = nl.zeros((128, 512), nl.bfloat16)
    p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=a, moving=b)  # dtype-pair


def matmul_int8_inputs(x):
    a = nl.zeros((128, 128), nl.int8)
    b = nl.zeros((128, 512), nl.int8)
    p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=a, moving=b)  # dtype-int8


def matmul_bf16_psum_on_trn2(x):
    a = nl.zeros((128, 128), nl.bfloat16)
    p = nl.ndarray((128, 128), nl.bfloat16, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=a, moving=a)  # psum-dtype


def bitwise_on_floats(x):
    a = nl.zeros((128, 4), nl.float32)
    nisa.tensor_tensor(dst=a, data1=a, data2=a, op=nl.bitwise_and)  # bitvec


def memset_fraction_into_int(x):
    a = nl.ndarray((128, 4), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=a, value=0.5)  # memset-int


def float64_tile(x):
    nl.ndarray((128, 64), np.float64, buffer=nl.sbuf)  # float64


def transpose_changes_dtype(x):
    a = nl.zeros((32, 32), nl.float32)
    b = nl.ndarray((32, 32), nl.bfloat16, buffer=nl.sbuf)
    nisa.nc_transpose(dst=b, data=a, engine=nisa.vector_engine)  # transpose-dtype


# --- out-of-bounds views ------------------------------------------------------------------------
def slice_past_the_end(x):
    nl.load(x[0:300, 0:4])  # slice-oob


def integer_index_past_the_end(x):
    x[0:128, 600]  # int-oob


def arange_past_the_end_unmasked(x):
    nl.load(x[nl.arange(256)[:, None], nl.arange(4)[None, :]])  # arange-oob


def tile_slice_past_the_end(x):
    a = nl.zeros((128, 64), nl.float32)
    nisa.memset(dst=a[:, 60:70], value=1.0)  # tile-oob


def slice_empty(x):
    nl.load(x[0:128, 5:5])  # slice-empty


CASES = [
    (partition_256_sbuf, [(128, 4)], "partition.limit", ["256"], "partition-256"),
    (partition_load_of_256_rows, [(256, 4)], "partition.limit", ["256"], "partition-load"),
    (partition_psum_200, [(128, 4)], "partition.limit", ["200"], "partition-psum"),
    (matmul_moving_1024, [], "matmul.moving_fmax", ["N=1024", "512"], "moving-n"),
    (matmul_stationary_256, [], "matmul.stationary_fmax", ["M=256", "128"], "stationary-m"),
    (matmul_k_mismatch, [], "matmul.k_mismatch", ["K=128", "K=64"], "k-mismatch"),
    (matmul_crosses_bank, [], "psum.bank_overflow", ["[1024, 3072)", "2048"], "bank"),
    (matmul_dst_shape, [], "matmul.dst_shape", ["[64, 256]", "[128, 256]"], "dst-shape"),
    (nl_matmul_k_mismatch, [], "matmul.k_mismatch", ["K=128", "K=32"], "nl-matmul-k"),
    (transpose_too_big, [], "transpose.size", ["[128, 256]"], "transpose-size"),
    (vector_transpose_too_big, [], "transpose.size", ["32x32", "[64, 64]"], "vector-transpose"),
    (tensor_engine_reads_psum, [], "engine.memory_access", ["tensor engine cannot read PSUM"], "te-psum"),
    (tensor_engine_writes_sbuf, [], "engine.memory_access", ["tensor engine cannot write SBUF"], "te-sbuf"),
    (gpsimd_reads_psum, [], "engine.memory_access", ["gpsimd engine cannot read PSUM"], "gpsimd-psum"),
    (dma_writes_psum, [], "dma.psum", ["PSUM"], "dma-psum"),
    (vector_reads_hbm, [], "engine.memory_access", ["in0 must be on chip", "x+0"], "vector-hbm"),
    (both_inputs_in_psum, [], "tensor_tensor.both_psum", ["PSUM"], "both-psum"),
    (partition_start_off_quadrant, [], "partition.start", ["got 16"], "quadrant"),
    (partition_mismatch, [], "shape.partition_mismatch", ["128", "64"], "partition-mismatch"),
    (free_size_mismatch, [], "shape.free_mismatch", ["8 elements", "4"], "free-mismatch"),
    (reduce_non_trailing_axis, [], "reduce.axes", ["axis=1", "[128, 4, 8]"], "reduce-axis"),
    (bn_stats_too_wide, [], "bn_stats.fmax", ["1024", "512"], "bn-stats"),
    (activation_not_a_function, [], "op.unknown", ["'add'"], "act-op"),
    (matmul_fp32_with_bf16, [], "matmul.dtype_pair", ["float32", "bfloat16"], "dtype-pair"),
    (matmul_int8_inputs, [], "matmul.dtype", ["int8"], "dtype-int8"),
    (matmul_bf16_psum_on_trn2, [], "matmul.psum_dtype", ["bfloat16"], "psum-dtype"),
    (bitwise_on_floats, [], "alu.bitvec_dtype", ["bitwise_and", "float32"], "bitvec"),
    (memset_fraction_into_int, [], "memset.value", ["int32", "0.5"], "memset-int"),
    (float64_tile, [], "dtype.unsupported", ["float64"], "float64"),
    (transpose_changes_dtype, [], "transpose.dtype", ["float32", "bfloat16"], "transpose-dtype"),
    (slice_past_the_end, [(256, 4)], "index.out_of_bounds", ["0:300", "256"], "slice-oob"),
    (integer_index_past_the_end, [], "index.out_of_bounds", ["600", "512"], "int-oob"),
    (arange_past_the_end_unmasked, [(128, 4)], "index.out_of_bounds", ["255", "128"], "arange-oob"),
    (tile_slice_past_the_end, [], "index.out_of_bounds", ["60:70", "64"], "tile-oob"),
    (slice_empty, [], "index.out_of_bounds", ["5:5"], "slice-empty"),
]


@pytest.mark.parametrize("body,shapes,rule,values,marker", CASES, ids=[c[0].__name__ for c in CASES])
def test_rejected_with_rule_value_and_line(body, shapes, rule, values, marker):
    err = _launch(body, *shapes)
    check_error(err, rule, *values, marker=marker)
    # the message quotes the offending statement itself
    assert f"# {marker}" in str(err)


def test_every_rule_id_is_documented_in_the_readme():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()  # packages/nki/README.md
    missing = sorted({rule for _, _, rule, _, _ in CASES} - {r for r in readme.split("`")})
    assert not missing, f"rule ids missing from packages/nki/README.md: {missing}"
