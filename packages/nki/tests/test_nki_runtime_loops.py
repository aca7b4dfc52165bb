"""Run-time control flow in NKI kernels: nl.fori_loop / nl.while_loop (traced once, run as often as
the data says), nisa.register_*, run-time addressing (``.ap(scalar_offset=...)`` and the
``vector_offset`` indirect gather/scatter), the timing of the iterations that actually ran, and
the errors (each with its rule id and the kernel line)."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from neuron_sim.errors import AccessPatternError, ExecutionError
from neuron_sim.executor import exact
from nki import NkiValidationError
from nki_helpers import BF16, DTYPES, assert_close, check_error, f32, line_of, rand

HERE = __file__


@pytest.fixture(autouse=True)
def bounded_loops(monkeypatch):
    """A kernel whose loop never ends fails in milliseconds rather than after 10M iterations."""
    monkeypatch.setattr(exact, "MAX_LOOP_ITERATIONS", 10_000)


def bound(n):
    return np.array([[n]], np.int32)


def opcodes(kernel):
    return [r.opcode for r in kernel.last_timing[0].instructions]


# --- fori_loop with a bound read from HBM -------------------------------------------------------


EXP_ROWS_TRACES = []


@nki.jit
def exp_rows(data, ub_input, output):
    """exp of rows 0..n-1 of ``data``, n read from HBM at run time (one row per iteration)."""
    EXP_ROWS_TRACES.append(data.shape)  # runs at trace time only
    ub_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ub_sb, src=ub_input)
    ub = nisa.register_alloc()
    nisa.register_load(ub, ub_sb)
    temp = nl.ndarray((1, data.shape[1]), dtype=data.dtype, buffer=nl.sbuf)

    def body(i):
        nisa.dma_copy(dst=temp, src=data.ap([[data.shape[1], 1], [1, data.shape[1]]], scalar_offset=i, indirect_dim=0))
        nisa.activation(dst=temp, op=nl.exp, data=temp)
        nisa.dma_copy(dst=output.ap([[data.shape[1], 1], [1, data.shape[1]]], scalar_offset=i, indirect_dim=0), src=temp)

    nl.fori_loop(0, ub, body)  # exp-rows-loop


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [7, 0, 10])
def test_fori_loop_with_a_bound_from_hbm(dtype, n):
    x = rand((10, 64), dtype, seed=n)
    out = np.zeros((10, 64), dtype)
    exp_rows(x, bound(n), out)
    assert_close(out[:n], np.exp(f32(x[:n])).astype(dtype), dtype)
    assert (f32(out[n:]) == 0).all()  # rows past the bound are never written


def test_one_trace_serves_every_bound_and_timing_follows_the_iterations_run():
    kernel = nki.jit(exp_rows.func)  # a fresh kernel: nothing traced yet
    x = rand((10, 64), seed=3)
    EXP_ROWS_TRACES.clear()
    totals = {}
    for n in (2, 4, 8):
        out = np.zeros_like(x)
        kernel(x, bound(n), out)
        ops = opcodes(kernel)
        assert ops.count("ACTIVATE") == n and ops.count("LOOP_END") == n and ops.count("LOOP_START") == 1
        totals[n] = kernel.last_timing[0].total_ns
    program = kernel.compile((x, bound(2), np.zeros_like(x)), {}).programs[0]
    assert EXP_ROWS_TRACES == [(10, 64)]  # traced once: the bound is data, not part of the signature
    start = next(i for i in program.instructions if i.opcode == "LOOP_START")
    assert isinstance(start.upper, str) and start.location == f"{HERE}:{line_of('exp-rows-loop', HERE)}"
    assert totals[2] < totals[4] < totals[8]
    # each iteration costs the same: the time grows linearly with the bound
    assert totals[8] - totals[4] == pytest.approx(2 * (totals[4] - totals[2]), rel=0.02)
    # every record of the loop body points back at the kernel line that issued it
    body_lines = {r.nki_source_location for r in kernel.last_timing[0].instructions if r.opcode == "ACTIVATE"}
    assert len(body_lines) == 1 and body_lines.pop().startswith(HERE)


@nki.jit
def prefix_sums(x, out):
    """out[i] = sum of x[0..i-1]: a nested run-time loop whose inner bound is the outer counter."""
    acc = nl.ndarray((1, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    row = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    res = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    pattern = [[x.shape[1], 1], [1, x.shape[1]]]

    def outer(i):
        nisa.memset(dst=acc, value=0.0)

        def inner(j):
            nisa.dma_copy(dst=row, src=x.ap(pattern, scalar_offset=j, indirect_dim=0))
            nisa.tensor_tensor(dst=acc, data1=acc, data2=row, op=nl.add)

        nl.fori_loop(0, i, inner)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out.ap(pattern, scalar_offset=i, indirect_dim=0), src=res)

    nl.fori_loop(0, x.shape[0], outer)


@pytest.mark.parametrize("dtype", DTYPES)
def test_nested_fori_loops(dtype):
    x = rand((6, 32), dtype, seed=4)
    out = np.zeros_like(x)
    prefix_sums(x, out)
    xs = f32(x).astype(np.float64)
    expected = np.concatenate([np.zeros((1, 32)), np.cumsum(xs, axis=0)[:-1]])
    assert_close(out, expected.astype(np.float32).astype(dtype), dtype)
    ops = opcodes(prefix_sums)
    assert ops.count("TENSOR_TENSOR") == 0 + 1 + 2 + 3 + 4 + 5  # inner trip counts 0..5, one per activation
    assert ops.count("LOOP_START") == 1 + 6


def test_fori_loop_with_static_bounds_and_step():
    @nki.jit
    def every_third(x, out):
        t = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)

        def body(i):
            nisa.dma_copy(dst=t, src=x.ap([[8, 1], [1, 8]], scalar_offset=i, indirect_dim=0))
            nisa.dma_copy(dst=out.ap([[8, 1], [1, 8]], scalar_offset=i, indirect_dim=0), src=t)

        nl.fori_loop(1, 9, body, step=3)

    x = rand((9, 8), seed=5)
    out = np.zeros_like(x)
    every_third(x, out)
    np.testing.assert_array_equal(out[[1, 4, 7]], x[[1, 4, 7]])
    assert (np.delete(out, [1, 4, 7], axis=0) == 0).all()
    assert opcodes(every_third).count("LOOP_END") == 3


# --- while_loop ---------------------------------------------------------------------------------


@nki.jit
def countdown(n_input, out):
    """Count passes of a while loop whose condition is a value in SBUF, decremented each pass."""
    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=n_sb, src=n_input)
    acc = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    start = nisa.register_alloc()
    nisa.register_load(start, n_sb)

    def body(cond):
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
        nisa.tensor_scalar(dst=n_sb, data=n_sb, op0=nl.subtract, operand0=1)
        nxt = nisa.register_alloc()
        nisa.register_load(nxt, n_sb)
        return nxt

    nl.while_loop(start, body)
    nisa.dma_copy(dst=out, src=acc)


@pytest.mark.parametrize("n", [5, 1, 0])
def test_while_loop_counts_down(n):
    out = np.full((1, 1), -1.0, np.float32)
    countdown(bound(n), out)
    assert out[0, 0] == n
    ops = opcodes(countdown)
    assert ops.count("LOOP_END") == n and ops.count("ACTIVATE") + ops.count("TENSOR_SCALAR") == 2 * n


def test_while_loop_that_never_clears_names_its_kernel_line(monkeypatch):
    monkeypatch.setattr(exact, "MAX_LOOP_ITERATIONS", 25)

    @nki.jit
    def forever(x, out):
        one = nisa.register_alloc(1)
        nl.while_loop(one, lambda cond: cond)  # runaway-while
        nisa.dma_copy(dst=out, src=x)

    x = rand((4, 4))
    with pytest.raises(ExecutionError) as info:
        forever(x, np.zeros_like(x))
    text = str(info.value)
    assert f"{HERE}:{line_of('runaway-while', HERE)}" in text and "25 iterations" in text


# --- registers ----------------------------------------------------------------------------------


def test_register_alloc_move_load_and_store():
    @nki.jit
    def registers(values, out):
        src = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=values)
        t = nl.ndarray((1, 4), dtype=nl.int32, buffer=nl.sbuf)
        a = nisa.register_alloc(7)
        b = nisa.register_alloc()
        nisa.register_store(t[0:1, 0:1], b)  # 0: a fresh register defaults to 0
        nisa.register_move(b, a)
        nisa.register_move(a, -(2**31))
        nisa.register_store(t[0:1, 1:2], b)  # 7: moved before a changed
        nisa.register_store(t[0:1, 2:3], a)
        nisa.register_load(b, src)
        nisa.register_store(t[0:1, 3:4], b)
        nisa.dma_copy(dst=out, src=t)

    out = np.zeros((1, 4), np.int32)
    registers(np.array([[123456789]], np.int32), out)
    assert out.tolist() == [[0, 7, -(2**31), 123456789]]


# --- scalar_offset ------------------------------------------------------------------------------


@nki.jit
def pick_row(table, index, out):
    i_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i_sb, src=index)
    row = nl.ndarray((1, table.shape[1]), dtype=table.dtype, buffer=nl.sbuf)
    view = table.ap([[table.shape[1], 1], [1, table.shape[1]]], scalar_offset=i_sb, indirect_dim=0)
    nisa.dma_copy(dst=row, src=view)  # pick-row-dma
    nisa.dma_copy(dst=out, src=row)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [0, 3, 5])
def test_scalar_offset_from_a_one_by_one_sbuf_tensor(dtype, k):
    table = rand((6, 16), dtype, seed=6)
    out = np.zeros((1, 16), dtype)
    pick_row(table, bound(k), out)
    np.testing.assert_array_equal(f32(out[0]), f32(table[k]))
    assert "REG_LOAD" in opcodes(pick_row)  # the [1, 1] tensor is read into a register at run time


@pytest.mark.parametrize("k", [6, -1])
def test_scalar_offset_out_of_the_tensor_is_a_clean_run_time_error(k):
    table = rand((6, 16), seed=6)
    with pytest.raises(ExecutionError) as info:
        pick_row(table, bound(k), np.zeros((1, 16), np.float32))
    err = info.value.original
    assert isinstance(err, AccessPatternError)
    assert err.rule == "ap.tensor_bounds" and "'table'" in str(err)
    assert err.location == f"{HERE}:{line_of('pick-row-dma', HERE)}"


def test_scalar_offset_along_an_inner_dim_and_in_sbuf():
    @nki.jit
    def planes(x, index, out):
        i_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=index)
        # HBM [4, 3, 8]: plane k of dim 1 moves k * 8 elements
        t = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x.ap([[24, 4], [1, 8]], scalar_offset=i_sb, indirect_dim=1))
        # SBUF [4, 8]: a run-time column offset along the free dim
        k = nisa.register_alloc(3)
        u = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t.ap([[8, 4], [1, 4]], scalar_offset=k, indirect_dim=1))
        nisa.dma_copy(dst=out[:, 0:8], src=t)
        nisa.dma_copy(dst=out[:, 8:12], src=u)

    x = rand((4, 3, 8), seed=7)
    out = np.zeros((4, 12), np.float32)
    planes(x, bound(2), out)
    np.testing.assert_array_equal(out[:, 0:8], x[:, 2])
    np.testing.assert_array_equal(out[:, 8:12], x[:, 2, 3:7])


def test_views_of_a_scalar_offset_view_keep_the_offset():
    # fixed: slicing the view used to drop the run-time offset (it lived on one cached pattern)
    @nki.jit
    def sliced(x, out):
        r = nisa.register_alloc(2)
        view = x.ap([[8, 1], [1, 8]], scalar_offset=r, indirect_dim=0)
        t = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=view[:, 4:8])
        nisa.dma_copy(dst=out[0:1, 0:4], src=t)
        # .ap on a slice moves whole rows of x (the slice's row stride), not rows of the slice
        nisa.dma_copy(dst=t, src=x[:, 0:4].ap([[8, 1], [1, 4]], scalar_offset=r, indirect_dim=0))
        nisa.dma_copy(dst=out[0:1, 4:8], src=t)

    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = np.zeros((1, 8), np.float32)
    sliced(x, out)
    np.testing.assert_array_equal(out[0], np.concatenate([x[2, 4:8], x[2, 0:4]]))


def test_loop_counter_moves_an_sbuf_window():
    @nki.jit
    def columns(x, out):
        t = nl.ndarray((4, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        u = nl.ndarray((4, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=u, value=0.0)

        def body(i):  # u[:, 4i : 4i+4] = 2 * t[:, 4i : 4i+4]
            win_t = t.ap([[16, 4], [1, 4]], scalar_offset=i, indirect_dim=1)
            win_u = u.ap([[16, 4], [1, 4]], scalar_offset=i, indirect_dim=1)
            nisa.tensor_scalar(dst=win_u, data=win_t, op0=nl.multiply, operand0=2.0)

        nl.fori_loop(0, 13, body, step=4)  # i = 0, 4, 8, 12 -> columns 0.., 4.., 8.., 12..
        nisa.dma_copy(dst=out, src=u)

    x = rand((4, 16), seed=8)
    out = np.zeros_like(x)
    columns(x, out)
    np.testing.assert_array_equal(out, 2 * x)


# --- vector_offset: indirect gather and scatter ---------------------------------------------------


@nki.jit
def embed(table, ids, out):
    """Gather one table row per partition: out[p] = table[ids[p]]."""
    i_sb = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i_sb, src=ids)
    rows = nl.ndarray((128, table.shape[1]), dtype=table.dtype, buffer=nl.sbuf)
    nisa.memset(dst=rows, value=-1.0)
    V, D = table.shape
    nisa.dma_copy(dst=rows, src=table.ap([[D, V], [1, D]], vector_offset=i_sb))  # embed-gather
    nisa.dma_copy(dst=out, src=rows)


@nki.jit
def embed_skip(table, ids, out):
    i_sb = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i_sb, src=ids)
    rows = nl.ndarray((128, table.shape[1]), dtype=table.dtype, buffer=nl.sbuf)
    nisa.memset(dst=rows, value=-1.0)
    nisa.dma_copy(dst=rows, src=table.vector_select(0, i_sb), oob_mode=nisa.oob_mode.skip)
    nisa.dma_copy(dst=out, src=rows)


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_offset_gathers_embedding_rows(dtype):
    V, D = 1000, 64
    table = rand((V, D), dtype, seed=9)
    ids = np.random.default_rng(9).integers(0, V, size=(128, 1)).astype(np.int32)
    ids[:4, 0] = [0, V - 1, 17, 17]  # both ends, and a repeated row
    out = np.zeros((128, D), dtype)
    embed(table, ids, out)
    np.testing.assert_array_equal(f32(out), f32(table[ids[:, 0]]))
    assert "DMA_INDIRECT" in opcodes(embed)
    # vector_select is the same gather
    out2 = np.zeros((128, D), dtype)
    embed_skip(table, ids, out2)
    np.testing.assert_array_equal(f32(out2), f32(out))


def test_vector_offset_scatters_rows():
    @nki.jit
    def scatter(rows_in, ids, table):
        i_sb = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=ids)
        rows = nl.ndarray(rows_in.shape, dtype=rows_in.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=rows_in)
        nisa.dma_copy(dst=table.vector_select(0, i_sb), src=rows)

    V, D = 300, 32
    ids = np.random.default_rng(10).permutation(V)[:128].reshape(128, 1).astype(np.int32)
    rows = rand((128, D), seed=10)
    table = np.full((V, D), 5.0, np.float32)
    scatter(rows, ids, table)
    np.testing.assert_array_equal(table[ids[:, 0]], rows)
    untouched = np.setdiff1d(np.arange(V), ids[:, 0])
    assert (table[untouched] == 5.0).all()


def test_scatter_with_dst_rmw_op_adds_into_the_rows():
    """dst_rmw_op=nl.add: the DMA engines' read-add-write - repeated indices add up, indices outside
    the table are skipped with oob_mode=skip; only nl.add into a scatter is taken."""
    @nki.jit
    def scatter_add(rows_in, ids, table):
        i_sb = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=ids)
        rows = nl.ndarray(rows_in.shape, dtype=rows_in.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=rows_in)
        nisa.dma_copy(dst=table[i_sb, :], src=rows, oob_mode=nisa.oob_mode.skip, dst_rmw_op=nl.add)

    V, D = 40, 16
    ids = np.random.default_rng(13).integers(0, V, size=(128, 1)).astype(np.int32)
    ids[3, 0] = -1
    rows = rand((128, D), seed=13)
    table = np.full((V, D), 1.0, np.float32)
    scatter_add(rows, ids, table)
    expected = np.full((V, D), 1.0, np.float32)
    keep = ids[:, 0] >= 0
    np.add.at(expected, ids[keep, 0], rows[keep])
    np.testing.assert_allclose(table, expected, rtol=1e-6, atol=1e-6)

    @nki.jit
    def plain_rmw(x, out):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t, dst_rmw_op=nl.add)

    with pytest.raises(NkiValidationError, match=r"\[dma.rmw\] dst_rmw_op=.*only nl.add, into an indirect HBM view"):
        plain_rmw(np.ones((4, 8), np.float32), np.zeros((4, 8), np.float32))


def test_out_of_bounds_index_is_an_error_naming_the_kernel_line():
    V, D = 50, 16
    table = rand((V, D), seed=11)
    ids = np.arange(128, dtype=np.int32).reshape(128, 1) % V
    ids[5, 0], ids[7, 0] = V, -1
    with pytest.raises(ExecutionError) as info:
        embed(table, ids, np.zeros((128, D), np.float32))
    err = info.value.original
    assert isinstance(err, AccessPatternError)
    assert err.rule == "dma.index_out_of_bounds" and "index 50" in str(err) and "2 bad index" in str(err)
    assert err.location == f"{HERE}:{line_of('embed-gather', HERE)}"


def test_out_of_bounds_rows_are_skipped_with_oob_mode_skip():
    V, D = 50, 16
    table = rand((V, D), seed=12)
    ids = np.arange(128, dtype=np.int32).reshape(128, 1) % V
    ids[5, 0], ids[7, 0] = V, -1
    out = np.zeros((128, D), np.float32)
    embed_skip(table, ids, out)
    assert (out[[5, 7]] == -1.0).all()  # left as they were (the memset)
    keep = np.delete(np.arange(128), [5, 7])
    np.testing.assert_array_equal(out[keep], table[ids[keep, 0]])


# --- errors: rule id and kernel line ------------------------------------------------------------


def _run(kernel):
    x = np.ones((4, 8), np.float32)
    kernel(x, np.zeros_like(x))


@nki.jit
def branches_on_a_register(x, out):
    r = nisa.register_alloc(1)
    if r:  # if-register
        nisa.dma_copy(dst=out, src=x)


@nki.jit
def ranges_over_a_counter(x, out):
    def body(i):
        for _ in range(i):  # range-register
            pass

    nl.fori_loop(0, 2, body)
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def compares_a_counter(x, out):
    def body(i):
        return i < 3  # compare-register

    nl.fori_loop(0, 2, body)
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def writes_the_counter(x, out):
    def body(i):
        nisa.register_move(i, 3)  # move-counter

    nl.fori_loop(0, 2, body)
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def loads_into_the_counter(x, out):
    t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0)

    def body(i):
        nisa.register_load(i, t)  # load-counter

    nl.fori_loop(0, 2, body)
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def offsets_the_partition_dim(x, out):
    t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    r = nisa.register_alloc(1)
    t.ap([[8, 1], [1, 8]], scalar_offset=r, indirect_dim=0)  # partition-offset
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def float_step(x, out):
    nl.fori_loop(0, 4, lambda i: None, step=1.5)  # float-step
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def zero_step(x, out):
    nl.fori_loop(0, 4, lambda i: None, step=0)  # zero-step
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def float_bound(x, out):
    nl.fori_loop(0, 4.0, lambda i: None)  # float-bound
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def while_from_an_int(x, out):
    nl.while_loop(3, lambda c: c)  # while-int
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def while_body_returns_an_int(x, out):
    r = nisa.register_alloc(0)
    nl.while_loop(r, lambda c: 0)  # while-return
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def moves_a_float(x, out):
    r = nisa.register_alloc()
    nisa.register_move(r, 2.7)  # move-float
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def moves_too_big(x, out):
    nisa.register_alloc(2**31)  # alloc-too-big
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def stores_an_int(x, out):
    t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.register_store(t, 5)  # store-int
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def loads_a_number(x, out):
    r = nisa.register_alloc()
    nisa.register_load(r, 5)  # load-number
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def loads_a_float_tile(x, out):
    t = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    r = nisa.register_alloc()
    nisa.register_load(r, t)  # load-float-tile
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def offset_from_psum(x, out):
    t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.psum)
    x.ap([[8, 1], [1, 8]], scalar_offset=t, indirect_dim=0)  # psum-offset
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def offset_dim_out_of_range(x, out):
    r = nisa.register_alloc(0)
    x.ap([[8, 1], [1, 8]], scalar_offset=r, indirect_dim=2)  # offset-dim
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def both_offsets(x, out):
    idx = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
    r = nisa.register_alloc(0)
    x.ap([[8, 4], [1, 8]], scalar_offset=r, vector_offset=idx)  # both-offsets
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def adds_an_indirect_view(x, out):
    idx = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=idx, value=0)
    t = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=x.vector_select(0, idx))  # add-indirect
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def slices_an_indirect_view(x, out):
    idx = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
    view = x.vector_select(0, idx)
    view[:, 0:4]  # slice-indirect
    nisa.dma_copy(dst=out, src=x)


@nki.jit
def gathers_from_sbuf(x, out):
    t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
    idx = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
    t.vector_select(0, idx)  # sbuf-gather
    nisa.dma_copy(dst=out, src=x)


@pytest.mark.parametrize("kernel,rule,marker,value", [
    (branches_on_a_register, "register.branch", "if-register", "`if`"),
    (ranges_over_a_counter, "register.branch", "range-register", "range()"),
    (compares_a_counter, "register.branch", "compare-register", "comparisons"),
    (writes_the_counter, "register.frozen", "move-counter", "loop counter"),
    (loads_into_the_counter, "register.frozen", "load-counter", "read-only"),
    (offsets_the_partition_dim, "view.scalar_offset", "partition-offset", "partition dim"),
    (float_step, "loop.step", "float-step", "1.5"),
    (zero_step, "loop.step", "zero-step", "got 0"),
    (float_bound, "loop.bound", "float-bound", "4.0"),
    (while_from_an_int, "loop.condition", "while-int", "got 3"),
    (while_body_returns_an_int, "loop.condition", "while-return", "got 0"),
    (moves_a_float, "register.value", "move-float", "2.7"),
    (moves_too_big, "register.value", "alloc-too-big", str(2**31)),
    (stores_an_int, "register.type", "store-int", "got 5"),
    (loads_a_number, "register.type", "load-number", "got 5"),
    (loads_a_float_tile, "register.tile", "load-float-tile", "float32"),
    (offset_from_psum, "view.scalar_offset", "psum-offset", "psum"),
    (offset_dim_out_of_range, "view.scalar_offset", "offset-dim", "indirect_dim 2"),
    (both_offsets, "view.vector_offset", "both-offsets", "not both"),
    (adds_an_indirect_view, "view.vector_offset", "add-indirect", "only a DMA"),
    (slices_an_indirect_view, "view.vector_offset", "slice-indirect", "cannot be sliced"),
    (gathers_from_sbuf, "view.vector_offset", "sbuf-gather", "on chip"),
], ids=lambda v: v if isinstance(v, str) and "." in v else None)
def test_errors_name_the_rule_and_the_kernel_line(kernel, rule, marker, value):
    with pytest.raises(NkiValidationError) as info:
        _run(kernel)
    check_error(info.value, rule, value, marker=marker)


def test_register_errors_need_a_kernel_being_traced():
    with pytest.raises(nki.NkiError):
        nisa.register_alloc(1)
    r = nl.VirtualRegister("r")
    with pytest.raises(nki.NkiError):
        bool(r)


def test_bf16_table_gather_is_bit_exact():
    table = rand((64, 32), BF16, seed=13)
    ids = (np.arange(128, dtype=np.int32) * 7 % 64).reshape(128, 1)
    out = np.zeros((128, 32), BF16)
    embed(table, ids, out)
    assert out.tobytes() == table[ids[:, 0]].tobytes()


def test_nl_load_and_store_of_indirect_views_gather_and_scatter():
    """``nl.load(t[idx, ...])`` / ``nl.store(t[idx, ...], v)`` (legacy) and of ``vector_select``
    views: the indirect DMA, as nisa.dma_copy does it."""
    @nki.jit
    def gather_then_scatter(table, ids, out):
        idx = nl.load(ids)
        rows = nl.load(table[idx, :])
        nl.store(out.vector_select(0, idx), nl.multiply(rows, 2.0))

    table = rand((10, 8), seed=30)
    ids = np.array([[3], [0], [7], [9]], np.int32)
    out = np.zeros((10, 8), np.float32)
    gather_then_scatter(table, ids, out)
    np.testing.assert_array_equal(out[ids[:, 0]], 2 * table[ids[:, 0]])
    assert (out[[1, 2, 4, 5, 6, 8]] == 0).all()
