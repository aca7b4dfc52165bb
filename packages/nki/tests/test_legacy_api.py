"""The legacy ``neuronxcc.nki`` API: the import path, index expressions, masks, tiles returned
by ops, SPMD grids and the legacy entry points."""

import json
import os

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import nki as new_nki
import numpy as np
import pytest
from neuron_sim.errors import ConfigurationError
from nki_helpers import assert_close, rand


def test_import_paths_are_the_same_modules():
    import neuronxcc.nki.isa
    import neuronxcc.nki.language
    import nki.isa
    import nki.language

    assert neuronxcc.nki.language is nki.language and neuronxcc.nki.isa is nki.isa
    assert nki.jit is new_nki.jit and nki.simulate_kernel is new_nki.simulate_kernel


@nki.jit
def spmd_add(a, b):
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    i_f = nl.program_id(1) * 256 + nl.arange(256)[None, :]
    nl.store(c[i_p, i_f], value=nl.load(a[i_p, i_f]) + nl.load(b[i_p, i_f]))
    return c


def test_spmd_grid_runs_every_instance():
    a, b = rand((384, 512), seed=1), rand((384, 512), seed=2)
    assert_close(nki.simulate_kernel(spmd_add[3, 2], a, b), a + b)
    compiled = spmd_add[3, 2].compile((a, b), {})
    # instances run one after another on one core: one program, device times add up
    assert len(compiled.programs) == 1 and not compiled.parallel


def test_program_queries_on_a_2d_grid():
    seen = []

    @nki.jit
    def probe(x):
        seen.append((nl.program_id(0), nl.program_id(1), nl.num_programs(), nl.num_programs(0), nl.num_programs(axes=1),
                     nl.program_ndim()))
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out

    probe[2, 3](rand((8, 8)))
    assert seen[0] == (0, 0, 6, 2, 3, 2) and seen[-1] == (1, 2, 6, 2, 3, 2) and len(seen) == 6


def test_mgrid_arange_steps_and_ds():
    @nki.jit
    def gather(x):
        out = nl.ndarray((64, 32), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:64, 0:32]
        evens = nl.load(x[2 * i_p, i_f + 8])  # every other row, columns 8..39
        odd_cols = nl.load(x[nl.ds(1, 64), nl.arange(1, 64, 2)[None, :]])
        nl.store(out[i_p, i_f], value=evens + odd_cols)
        return out

    x = rand((128, 64), seed=3)
    assert_close(gather(x), x[0:128:2, 8:40] + x[1:65, 1:64:2])


def test_operators_return_new_tiles():
    @nki.jit
    def ops(a, b):
        out = nl.ndarray((6,) + a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        for i, t in enumerate([x * 2.0 + y, 1.0 - x, -y, x / y, (x > y) * 1.0, nl.maximum(x, y) ** 2.0]):
            nl.store(out[i], value=t)
        return out

    a, b = rand((128, 32), seed=4, low=0.5, high=2), rand((128, 32), seed=5, low=0.5, high=2)
    got = ops(a, b)
    for g, e in zip(got, [a * 2 + b, 1 - a, -b, a / b, (a > b) * 1.0, np.maximum(a, b) ** 2]):
        assert_close(g, e, rtol=1e-5)


def test_mask_restricts_compute_and_store():
    @nki.jit
    def masked_relu(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.zeros(x.shape, dtype=x.dtype))
        i_p, i_f = nl.mgrid[0:128, 0:64]
        t = nl.load(x[i_p, i_f])
        r = nl.relu(t, mask=(i_p < 100) & (i_f >= 16))
        nl.store(out[i_p, i_f], value=r, mask=(i_p < 100) & (i_f >= 16))
        return out

    x = rand((128, 64), seed=6)
    expected = np.zeros_like(x)
    expected[:100, 16:] = np.maximum(x[:100, 16:], 0)
    np.testing.assert_array_equal(masked_relu(x), expected)


def test_masked_load_past_the_end_of_a_tensor():
    @nki.jit
    def tail_rows(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        ix, iy = nl.arange(128)[:, None], nl.arange(x.shape[1])[None, :]
        for i in nl.affine_range((x.shape[0] + 127) // 128):
            t = nl.load(x[i * 128 + ix, iy], mask=(i * 128 + ix < x.shape[0]))
            nl.store(out[i * 128 + ix, iy], value=nl.exp(t), mask=(i * 128 + ix < x.shape[0]))
        return out

    x = rand((200, 16), seed=7)
    assert_close(tail_rows(x), np.exp(x), rtol=1e-6)


def test_par_dim_and_psum_accumulation():
    @nki.jit
    def matmul(lhsT, rhs):
        out = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((nl.par_dim(lhsT.shape[1]), rhs.shape[1]), dtype=nl.float32, buffer=nl.psum)
        for k in nl.sequential_range(lhsT.shape[0] // 128):
            acc += nl.matmul(nl.load(lhsT[k * 128:(k + 1) * 128, :]), nl.load(rhs[k * 128:(k + 1) * 128, :]),
                             transpose_x=True)
        nl.store(out, value=acc)
        return out

    lhsT, rhs = rand((384, 64), seed=8), rand((384, 200), seed=9)
    assert_close(matmul(lhsT, rhs), lhsT.T @ rhs, rtol=1e-4, atol=1e-4)


def test_plus_equals_on_sbuf_adds_elementwise():
    @nki.jit
    def running_sum(x):
        out = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((128, x.shape[1]), dtype=nl.float32)
        for i in nl.static_range(x.shape[0] // 128):
            acc += nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out, value=acc)
        return out

    x = rand((512, 16), seed=10)
    assert_close(running_sum(x), x.reshape(4, 128, 16).sum(0), rtol=1e-5)


def test_isa_calls_return_tiles():
    @nki.jit
    def isa_chain(x):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        e = nisa.activation(nl.exp, t, scale=0.5)  # exp(0.5 x)
        s = nisa.tensor_reduce(nl.add, e, axis=1, keepdims=True)
        m = nisa.tensor_scalar(t, nl.multiply, 2.0, op1=nl.add, operand1=1.0)  # 2x + 1
        mx = nisa.tensor_reduce(op=nl.max, data=m, axis=(1,), keepdims=True)
        r = nisa.reciprocal(s)
        c = nisa.tensor_copy(r, dtype=nl.float32)
        st = nisa.bn_aggr(nisa.bn_stats(t, dtype=nl.float32))
        io = nisa.iota(nl.arange(128)[:, None] * 3, dtype=nl.float32)
        ms = nisa.memset((128, 1), 7.0, nl.float32)
        tt = nisa.tensor_tensor(c, ms, op=nl.add)
        res = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        for j, col in enumerate([s, mx, r, tt, st[:, 0:1], st[:, 1:2], io, ms]):
            nisa.tensor_copy(dst=res[:, j:j + 1], src=col)
        nl.store(out, value=res)
        return out

    x = rand((128, 64), seed=11)
    s = np.exp(0.5 * x).sum(1)
    expected = np.stack([s, (2 * x + 1).max(1), 1 / s, 1 / s + 7, x.mean(1), x.var(1), 3.0 * np.arange(128),
                         np.full(128, 7.0)], axis=1)
    assert_close(isa_chain(x), expected, rtol=1e-5, atol=1e-5)


def test_iota_and_affine_select_from_index_expressions():
    @nki.jit
    def lower_triangle(x):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:128]
        t = nl.load(x)
        tri = nisa.affine_select(pred=(i_f <= i_p), on_true_tile=t, on_false_value=0.0)
        idx = nisa.iota(i_p * 128 + i_f, nl.float32)
        nl.store(out, value=nl.add(tri, nl.multiply(idx, 0.0)))
        return out

    x = rand((128, 128), seed=12)
    np.testing.assert_array_equal(lower_triangle(x), np.tril(x))


def test_baremetal_runs_and_saves_a_neff(tmp_path):
    path = tmp_path / "add.neff"
    a, b = rand((128, 256), seed=13), rand((128, 256), seed=14)
    out = nki.baremetal(spmd_add[1, 1], save_neff_name=str(path))(a, b)
    assert_close(out, a + b)
    assert os.path.getsize(path) > 0


def test_program_id_outside_a_grid_axis():
    @nki.jit
    def bad(x):
        nl.program_id(2)

    with pytest.raises(nki.NkiValidationError, match=r"\[spmd.axis\].*axis 2"):
        bad[2, 2](rand((8, 8)))


def test_layernorm_with_bn_stats_over_masked_free_chunks():
    # mgrid with three axes, a free-dim index taken from axis 0 of another mgrid (the mask follows
    # the index variable, not its broadcast position), numpy ufuncs as ALU ops, and an integer
    # index dropping a free dim of an SBUF tile.
    @nki.jit
    def layernorm(x, eps, gamma):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        R, H = x.shape
        i_p, i_f, i_w = nl.mgrid[0:128, 0:H, 0:1]
        g = nl.load(gamma.reshape((1, H))[i_w, i_f]).broadcast_to((128, H))
        for r in nl.affine_range((R + 127) // 128):
            rows = r * 128 + i_p < R
            t = nl.load(x[r * 128 + i_p, i_f], mask=rows)
            i_c, i_s = nl.mgrid[0:512, 0:6]
            chunks = (H + 511) // 512
            stats = nl.ndarray((128, 6 * chunks), dtype=np.float32)
            for j in nl.affine_range(chunks):
                stats[i_p, j * 6 + i_s] = nisa.bn_stats(t[i_p, j * 512 + i_c], mask=(j * 512 + i_c < H) & rows,
                                                        dtype=np.float32)
            mean_var = nisa.bn_aggr(stats[i_p, nl.arange(6 * chunks)[None, :]], mask=rows)
            mean, var = mean_var[i_p, 0], mean_var[i_p, 1]
            y = nisa.tensor_scalar(data=t, op0=np.subtract, operand0=mean, op1=np.multiply,
                                   operand1=nl.rsqrt(var + eps), mask=rows)
            nl.store(out[r * 128 + i_p, i_f], value=y * g, mask=rows)
        return out

    x, gamma = rand((200, 700), seed=20, low=-1, high=3), rand((700,), seed=21)
    mean, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    assert_close(layernorm(x, 1e-5, gamma), (x - mean) / np.sqrt(var + 1e-5) * gamma, rtol=1e-4, atol=1e-4)


def test_negative_index_expression_is_out_of_bounds():
    @nki.jit
    def shifted(x):
        nl.load(x[nl.arange(128)[:, None] - 1, nl.arange(4)[None, :]])

    with pytest.raises(nki.NkiValidationError, match=r"\[index.out_of_bounds\].*-1 \+ 1 \* arange\(128\)"):
        shifted(rand((128, 4)))


def test_platform_target_is_honoured_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="platform_target='trn3'.*honoured"):
        @nki.jit(mode="simulation", platform_target="trn3")
        def copy_trn3(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.load(a))
            return out

    x = rand((128, 64), seed=21)
    np.testing.assert_array_equal(copy_trn3(x), x)
    assert copy_trn3.last_timing[0].summary["target"] == "trn3"
    assert copy_trn3.compile((x,), {}).arch.name == "trn3"
    with pytest.raises(new_nki.NkiError, match="removed in NKI 0.3"):
        new_nki.jit(platform_target="trn3")  # the NKI 0.3+ namespace refuses it, as the SDK does
    with pytest.raises(ConfigurationError, match="trn9"):
        nki.jit(platform_target="trn9")


def test_trace_memset_shape_and_mgrid_attributes():
    @nki.trace
    def filled(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        grid = nl.mgrid[0:128, 0:32]
        t = nisa.memset(shape=(128, 32), value=0.25, dtype=nl.float32)
        nl.store(out[grid.p, grid.x], nl.add(t, nl.load(a[grid.p, grid.x])))
        return out

    x = rand((128, 32), seed=22)
    np.testing.assert_array_equal(filled(x), x + np.float32(0.25))


def test_an_index_summing_arange_terms_splits_one_dim_into_several():
    @nki.jit
    def split_free_dim(a):
        out = nl.ndarray((128, 4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None, None]
        i_a = nl.arange(4)[None, :, None]
        i_b = nl.arange(8)[None, None, :]
        t = nl.load(a[i_p, 8 * i_a + i_b])
        nl.store(out[i_p, i_a, i_b], t)
        return out

    a = rand((128, 32), seed=23)
    np.testing.assert_array_equal(split_free_dim(a), a.reshape(128, 4, 8))


def test_an_index_sum_past_the_end_is_out_of_bounds():
    @nki.jit
    def overrun(a):
        i_p = nl.arange(128)[:, None, None]
        i_a = nl.arange(4)[None, :, None]
        i_b = nl.arange(8)[None, None, :]
        nl.load(a[i_p, 8 * i_a + i_b + 1])  # sum-overrun
        return a

    with pytest.raises(nki.NkiValidationError) as err:
        overrun(rand((128, 32), seed=24))
    assert err.value.rule == "index.out_of_bounds" and "[1, 32]" in str(err.value)


def test_loading_a_column_of_an_hbm_tensor_gives_a_column_tile():
    @nki.jit
    def column_and_row(a):
        col = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        row = nl.ndarray((1, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        c = nl.load(a[0:128, 5])  # a [128, 1] tile
        r = nl.load(a[3, 0:64])  # a [1, 64] tile
        assert c.shape == (128, 1) and r.shape == (1, 64)
        nl.store(col, c)
        nl.store(row, r)
        return col, row

    a = rand((128, 64), seed=25)
    col, row = column_and_row(a)
    np.testing.assert_array_equal(col[:, 0], a[:, 5])
    np.testing.assert_array_equal(row[0], a[3])


def test_an_index_tile_on_dim_0_gathers_and_scatters_rows():
    @nki.jit
    def gather_rows(data, ids):
        out = nl.ndarray((64, data.shape[1]), dtype=data.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(64)[:, None]
        i_f = nl.arange(data.shape[1])[None, :]
        idx = nl.load(ids[i_p])  # a [64, 1] column of indices from a 1-D tensor
        nl.store(out, nl.load(data[idx[i_p, 0], i_f]))
        return out

    data = rand((128, 32), seed=26)
    ids = (3 * np.arange(64, dtype=np.int32)) % 128
    np.testing.assert_array_equal(gather_rows(data, ids), data[ids])


def test_an_index_tile_after_integer_indices_under_a_mask():
    # data[b, idx, i_f]: the integer picks one [rows, F] sub-tensor whose rows idx selects; the mask
    # keeps the first 100 rows of the index tile - the indices past them (999) are never used.
    @nki.jit
    def gather(data, idx):
        out = nl.ndarray((2, 100, 8), dtype=data.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.arange(128)[:, None], nl.arange(8)[None, :]
        ix = nl.load(idx)
        for b in nl.affine_range(2):
            nl.store(out[b, i_p, i_f], value=nl.load(data[b, ix, i_f], mask=(i_p < 100)), mask=(i_p < 100))
        return out

    data = rand((2, 50, 8), seed=27)
    idx = np.concatenate([(7 * np.arange(100)) % 50, np.full(28, 999)]).astype(np.int32).reshape(128, 1)
    np.testing.assert_array_equal(gather(data, idx), data[:, idx[:100, 0], :])


@nki.jit
def copy_block(a):
    b = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i, j = nl.program_id(0), nl.program_id(1)
    nl.store(b[i, j], nl.load(a[i, j]))
    return b


@pytest.mark.parametrize("grid, cores", [
    ((4, 2), [list(range(8))]),  # no nl.nc: every instance on one core
    ((nl.spmd_dim(nl.nc(2), 2), 2), [[0, 1, 2, 3], [4, 5, 6, 7]]),  # outer sub-dim over the cores
    ((nl.nc(2) * 2, 2), [[0, 1, 2, 3], [4, 5, 6, 7]]),
    ((nl.spmd_dim(2, nl.nc(2)), 2), [[0, 1, 4, 5], [2, 3, 6, 7]]),  # inner sub-dim over the cores
    ((2 * nl.nc(2), 2), [[0, 1, 4, 5], [2, 3, 6, 7]]),
])
def test_spmd_grid_dims_spread_instances_over_physical_cores(grid, cores):
    src = rand((4, 2, 128, 16), seed=27)
    np.testing.assert_array_equal(copy_block[grid](src), src)
    compiled = copy_block[grid].compile((src,), {})
    assert len(compiled.programs) == len(cores)
    for program, instances in zip(compiled.programs, cores):
        loads = [i for i in program.instructions if i.opcode == "DMA_COPY" and i.src.tensor == "a"]
        # instance (i, j) reads block i * 2 + j of a
        assert [ld.src.offset // (128 * 16 * 4) for ld in loads] == instances
    if len(cores) == 2:  # the two cores run at once
        assert copy_block.last_device_time_ns == pytest.approx(max(t.total_ns for t in copy_block.last_timing))


def test_nc_matmul_results_accumulate_into_psum_with_plus_equals():
    @nki.jit
    def k_sum(d, e):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        f_psum = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            dt = nl.load(d[k * 128:(k + 1) * 128, :])
            et = nl.load(e[k * 128:(k + 1) * 128, :])
            f_psum += nisa.nc_matmul(dt, et)
        nl.store(out, f_psum)
        return out

    d, e = rand((256, 128), seed=28), rand((256, 512), seed=29)
    np.testing.assert_allclose(k_sum(d, e), d.T @ e, rtol=2e-4, atol=2e-4)
    ops = [i.opcode for i in k_sum.compile((d, e), {}).programs[0].instructions]
    assert "TENSOR_TENSOR" not in ops  # the matmuls accumulate in PSUM; no separate add


def test_dynamic_range_is_a_run_time_loop():
    @nki.jit
    def first_rows(x, n, out):
        n_sb = nl.load(n)
        count = nisa.register_alloc()
        nisa.register_load(count, n_sb)
        row = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        for i in nl.dynamic_range(count):
            nisa.dma_copy(dst=row, src=x.ap([[x.shape[1], 1], [1, x.shape[1]]], scalar_offset=i))
            nisa.dma_copy(dst=out.ap([[x.shape[1], 1], [1, x.shape[1]]], scalar_offset=i), src=row)

    x = rand((6, 8), seed=30)
    out = np.zeros_like(x)
    first_rows(x, np.array([[4]], np.int32), out)
    np.testing.assert_array_equal(out[:4], x[:4])
    assert (out[4:] == 0).all()
    assert [i.opcode for i in first_rows.compile((x, np.array([[4]], np.int32), out), {}).programs[0].instructions].count(
        "LOOP_START") == 1


def test_device_print_prints_the_tile_after_the_launch(capsys):
    @nki.jit
    def shout(a):
        b = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.device_print("value of t:", t)
        nl.store(b, nl.multiply(t, 2.0))
        return b

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(shout(a), 2 * a)
    assert capsys.readouterr().out == f"value of t: {a}\n"


def test_benchmark_profile_and_tensor_type_arguments(tmp_path):
    from nki.typing import tensor

    @nki.profile(working_directory=str(tmp_path), save_neff_name="k.neff", save_trace_name="k.ntff", profile_nth=2)
    def exp_kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.exp(nl.load(x)))
        return out

    assert exp_kernel(tensor[[128, 64], nl.float32]) is None  # the shape is what a profile needs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.neff", "k.ntff", "profile_summary.json"]
    summary = json.loads((tmp_path / "profile_summary.json").read_text())
    assert summary["total_time_ns"] == pytest.approx(exp_kernel.kernel.last_device_time_ns)
    with pytest.raises(new_nki.NkiError, match="overwrite"):
        exp_kernel(tensor[[128, 64], nl.float32])
    with pytest.raises(new_nki.NkiError, match="absolute"):
        nki.profile(working_directory="relative/dir")


def test_masked_dma_copy_moves_only_the_elements_the_mask_keeps():
    """nisa.dma_copy(dst=..., src=..., mask=...) (legacy): rows past the end of x are not copied."""

    @nki.jit
    def tail_rows_by_dma(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        ix, iy = nl.arange(128)[:, None], nl.arange(x.shape[1])[None, :]
        for i in nl.affine_range((x.shape[0] + 127) // 128):
            t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[ix, iy], src=x[i * 128 + ix, iy], mask=(i * 128 + ix < x.shape[0]))
            nisa.dma_copy(dst=out[i * 128 + ix, iy], src=t[ix, iy], mask=(i * 128 + ix < x.shape[0]))
        return out

    x = rand((200, 16), seed=8)
    np.testing.assert_array_equal(tail_rows_by_dma(x), x)


def test_legacy_affine_select_of_a_psum_tile():
    # The legacy form accepts scores still in PSUM (flash attention's causal mask on QK^T): GpSimd
    # reads SBUF only, so the tile is copied to SBUF first.
    @nki.jit
    def causal_scores(q, k):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:128]
        scores = nl.matmul(nl.load(q), nl.load(k), transpose_x=True)  # [128, 128] in PSUM
        nl.store(out, value=nisa.affine_select(pred=(i_p >= i_f), on_true_tile=scores, on_false_value=-1e4,
                                               dtype=nl.float32))
        return out

    q, k = rand((64, 128), seed=15), rand((64, 128), seed=16)
    expected = np.where(np.tril(np.ones((128, 128), bool)), q.T @ k, -1e4)
    assert_close(causal_scores(q, k), expected, rtol=1e-4, atol=1e-4)


def test_legacy_op_first_with_tensors_by_keyword():
    # nisa.tensor_reduce(np.add, data=x, axis=(1,)): the op positional, the data by keyword
    @nki.jit
    def row_sums(x):
        out = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_reduce(np.add, data=nl.load(x), axis=(1,), dtype=nl.float32))
        return out

    x = rand((128, 64), seed=28)
    assert_close(row_sums(x), x.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)


def test_nc_matmul_is_transpose_with_a_constant_mask():
    # nki-samples' fused rmsnorm: nisa.nc_matmul(x, identity, is_transpose=True, mask=<bool>)
    @nki.jit
    def transposed(x):
        out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        i = nl.mgrid[0:128, 0:128]
        eye = nl.shared_identity_matrix(128, dtype=x.dtype)
        res = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.psum)
        res[i.p, i.x] = nisa.nc_matmul(nl.load(x)[i.p, i.x], eye, is_transpose=True, mask=True)
        nl.store(out, nl.copy(res))
        return out

    x = rand((128, 128), seed=29)
    np.testing.assert_array_equal(transposed(x), x.T)
