"""nisa scans and accumulators (tensor_scalar_cumulative, tensor_tensor_scan, select_reduce,
range_select), search (max8, nc_find_index8, nc_match_replace8, sequence_bounds) and random
numbers (dropout, set_rng_seed; nl.rand, nl.random_seed, nl.dropout) in kernels, in the NKI 0.6
form and the legacy one."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import rand


def test_tensor_scalar_cumulative_is_a_running_sum_along_each_row():
    @nki.jit
    def cumsum(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=dst, src=nl.load(x), op0=nl.multiply, imm0=2.0, op1=nl.add,
                                      reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nl.store(out, dst)
        return out

    x = rand((128, 37), seed=2)
    np.testing.assert_allclose(cumsum(x), np.cumsum(2 * x, axis=1, dtype=np.float32), rtol=1e-5, atol=1e-5)


def test_tensor_tensor_scan_is_a_linear_recurrence():
    @nki.jit
    def linear_scan(decay, data):
        out = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
        dst = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=dst, data0=nl.load(decay), data1=nl.load(data), initial=0.0, op0=nl.multiply,
                                op1=nl.add)
        nl.store(out, dst)
        return out

    decay, data = np.abs(rand((64, 20), seed=3)) * 0.5, rand((64, 20), seed=4)
    expected = np.zeros_like(data)
    state = np.zeros(64, np.float32)
    for t in range(20):
        state = decay[:, t] * state + data[:, t]
        expected[:, t] = state
    np.testing.assert_allclose(linear_scan(decay, data), expected, rtol=1e-5, atol=1e-6)


def test_select_reduce_legacy_form_returns_a_new_tile_and_reduces_into_reduce_res():
    @nki.jit
    def masked_max(x, keep):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        row_max = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
        res = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        t = nisa.select_reduce(predicate=nl.load(keep), on_true=nl.load(x), on_false=-1e9, reduce_res=res,
                               reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=np.max)
        nl.store(out, t)
        nl.store(row_max, res)
        return out, row_max

    x = rand((128, 33), seed=5)
    keep = (np.random.default_rng(6).uniform(size=(128, 33)) > 0.3).astype(np.uint8)
    selected = np.where(keep != 0, x, np.float32(-1e9))
    out, row_max = masked_max(x, keep)
    np.testing.assert_array_equal(out, selected)
    np.testing.assert_array_equal(row_max, selected.max(axis=1, keepdims=True))


def test_range_select_keeps_each_rows_window():
    @nki.jit
    def window(x, lo, hi):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.range_select(dst=dst, on_true_tile=nl.load(x), comp_op0=nl.greater_equal, comp_op1=nl.less,
                          bound0=nl.load(lo), bound1=nl.load(hi), on_false_value=-5.0)
        nl.store(out, dst)
        return out

    x = rand((32, 16), seed=7)
    lo = np.random.default_rng(8).integers(0, 8, (32, 1)).astype(np.float32)
    hi = lo + 4
    j = np.arange(16)[None, :]
    np.testing.assert_array_equal(window(x, lo, hi), np.where((j >= lo) & (j < hi), x, np.float32(-5.0)))


def test_top8_with_max8_find_index8_and_match_replace8():
    @nki.jit
    def top8(x):
        values = nl.ndarray((x.shape[0], 8), dtype=x.dtype, buffer=nl.shared_hbm)
        index = nl.ndarray((x.shape[0], 8), dtype=nl.uint32, buffer=nl.shared_hbm)
        rest = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        m = nisa.max8(src=t)
        nl.store(values, m)
        nl.store(index, nisa.nc_find_index8(data=t, vals=m))
        nl.store(rest, nisa.nc_match_replace8(data=t, vals=m, imm=float("-inf")))
        return values, index, rest

    x = rand((128, 100), seed=9)
    values, index, rest = top8(x)
    order = np.argsort(-x, axis=1, kind="stable")[:, :8]
    np.testing.assert_array_equal(values, np.take_along_axis(x, order, axis=1))
    np.testing.assert_array_equal(index, order.astype(np.uint32))
    expected = x.copy()
    np.put_along_axis(expected, order, -np.inf, axis=1)
    np.testing.assert_array_equal(rest, expected)


def test_sequence_bounds_returns_start_and_end_per_id():
    @nki.jit
    def bounds(ids):
        out = nl.ndarray((1, 2, ids.shape[1]), dtype=ids.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.sequence_bounds(segment_ids=nl.load(ids)))
        return out

    ids = np.array([[3, 3, 0, 5, 5, 5]], dtype=np.int32)
    assert bounds(ids).tolist() == [[[0, 0, 6, 3, 3, 3], [2, 2, -1, 6, 6, 6]]]


def test_random_numbers_repeat_with_the_seed():
    @nki.jit
    def draw(seed):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.set_rng_seed(nl.load(seed))
        nl.store(out, nl.rand((128, 64), dtype=nl.float32))
        return out

    a, b = draw(np.array([[3]], np.int32)), draw(np.array([[3]], np.int32))
    c = draw(np.array([[4]], np.int32))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c) and 0.0 <= a.min() and a.max() < 1.0


@pytest.mark.parametrize("rate", [0.25, 0.75])
def test_dropout_zeroes_at_the_rate(rate):
    @nki.jit
    def drop(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        half = x.shape[1] // 2
        t = nl.load(x)
        nl.random_seed(11)
        nl.store(out[:, :half], nl.dropout(t[:, :half], rate=rate))
        nl.store(out[:, half:], nisa.dropout(data=t[:, half:], prob=rate))
        return out

    x = np.ones((128, 512), np.float32)
    out = drop(x)
    for part in (out[:, :256], out[:, 256:]):
        assert abs(float((part == 0).mean()) - rate) < 0.02 and set(np.unique(part)) <= {0.0, 1.0}
