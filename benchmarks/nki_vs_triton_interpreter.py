"""NKI on our simulator vs Triton's CPU interpreter (TRITON_INTERPRET=1), same three jobs, same run.

Jobs: vector add over 1M fp32 elements, a 1024^3 fp32 matmul, row softmax over 4096x4096 fp32. Each is
written idiomatically in both languages: NKI kernels tiled as the NKI performance guide does them
([128, N] tiles with 1 MiB DMAs; a blocked matmul accumulating over K in PSUM; per-128-row softmax
with the fused exp(x - max) + row-sum activation), Triton kernels as in Triton's tutorials (01 vector
add, 03 matrix multiplication with tl.dot and the first of its autotune configs, the classic
one-program-per-row form of 02 fused softmax) on CPU torch tensors. Every output is checked against
numpy before its time is reported.

Figures are best-of-N wall time of a full call. NKI: a warm call (trace cached per signature; the
timing model result is cached too, since it is data-independent) is the figure the ratio uses; the
first call of a fresh kernel object (trace + timing model + exact execution) is reported next to it.
The NKI matmul call includes the host-side transpose of A into the lhsT layout the kernel takes.
Triton: an interpreted launch; its first call is reported too. Jobs whose single Triton run takes
more than 60 s are measured once. Each job's NKI and Triton runs follow each other, so a busy
machine slows both sides of a ratio alike as far as possible.

A second "large blocks" Triton variant per job (fewer, bigger programs, which the interpreter runs
faster; not what one would write for a GPU) is reported as a sensitivity check against the
strongest Triton baseline, not as the target figure.

Target: NKI (warm) >= 5x faster than Triton's interpreter on each job, while also producing the
simulated device time. Triton is a benchmark-only dependency: see requirements-triton.txt.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is imported
# One BLAS thread for both sides (set before numpy loads OpenBLAS; an explicit setting wins): on a
# 2-CPU machine that is also running anything else, OpenBLAS's second thread stalls each small GEMM,
# and the NKI matmul's warm call then swings between ~40 ms and ~2 s from run to run.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import importlib.metadata  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
import numpy as np  # noqa: E402
from _harness import best_of, report  # noqa: E402

try:
    import torch  # noqa: E402
    import triton  # noqa: E402
    import triton.language as tl  # noqa: E402
except ImportError as err:  # Triton is a benchmark-only dependency
    print(f"nki_vs_triton_interpreter: SKIPPED, {err.name} is not installed "
          "(pip install -r benchmarks/requirements-triton.txt; see that file)")
    raise SystemExit(0) from None

TARGET = 5.0
SLOW_RUN_S = 60.0  # a Triton run slower than this is measured once
P = 128  # partitions


# --- NKI kernels ---------------------------------------------------------------------------------
@nki.jit
def nki_vector_add(a_input, b_input):
    """1-D add viewed as [128, n/128]: [128, 2048] fp32 tiles, so every DMA moves 1 MiB."""
    n = a_input.shape[0]
    free = n // P
    tile_f = min(free, 2048)
    out = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    a2, b2, o2 = a_input.reshape((P, free)), b_input.reshape((P, free)), out.reshape((P, free))
    for j in nl.affine_range(free // tile_f):
        cols = slice(j * tile_f, (j + 1) * tile_f)
        a = nl.ndarray((P, tile_f), a_input.dtype, buffer=nl.sbuf)
        b = nl.ndarray((P, tile_f), a_input.dtype, buffer=nl.sbuf)
        c = nl.ndarray((P, tile_f), a_input.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=a2[:, cols])
        nisa.dma_copy(dst=b, src=b2[:, cols])
        nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.add)
        nisa.dma_copy(dst=o2[:, cols], src=c)
    return out


@nki.jit
def nki_matmul(lhsT, rhs):
    """out[M, N] = lhsT[K, M].T @ rhs[K, N]: both operands staged in SBUF once (K split into 128-row
    tiles on the partitions), then for each 128x512 output block the K tiles accumulate in one PSUM
    bank (stationary = lhsT tile [128, 128], moving = rhs tile [128, 512]); each 128-row output
    stripe is copied PSUM -> SBUF and stored with one DMA."""
    K, M = lhsT.shape
    _, N = rhs.shape
    tile_m, tile_k, tile_n = nl.tile_size.gemm_stationary_fmax, nl.tile_size.pmax, nl.tile_size.gemm_moving_fmax
    k_tiles = K // tile_k
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    lhsT_sb = nl.ndarray((tile_k, k_tiles, M), lhsT.dtype, buffer=nl.sbuf)
    rhs_sb = nl.ndarray((tile_k, k_tiles, N), rhs.dtype, buffer=nl.sbuf)
    for k in nl.affine_range(k_tiles):
        nisa.dma_copy(dst=lhsT_sb[:, k, :], src=lhsT[k * tile_k:(k + 1) * tile_k, :])
        nisa.dma_copy(dst=rhs_sb[:, k, :], src=rhs[k * tile_k:(k + 1) * tile_k, :])
    for m in nl.affine_range(M // tile_m):
        res_sb = nl.ndarray((tile_m, N), nl.float32, buffer=nl.sbuf)
        for n in nl.affine_range(N // tile_n):
            res_psum = nl.ndarray((tile_m, tile_n), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_tiles):
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_sb[:, k, m * tile_m:(m + 1) * tile_m],
                               moving=rhs_sb[:, k, n * tile_n:(n + 1) * tile_n])
            nisa.tensor_copy(dst=res_sb[:, n * tile_n:(n + 1) * tile_n], src=res_psum)
        nisa.dma_copy(dst=out[m * tile_m:(m + 1) * tile_m, :], src=res_sb)
    return out


@nki.jit
def nki_softmax(x):
    """Row softmax per 128-row tile: VectorE row max (negated), one ScalarE activation computing
    exp(x - max) and its row sum, VectorE reciprocal and scale."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    for r in nl.affine_range(rows // P):
        t = nl.ndarray((P, cols), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r * P:(r + 1) * P, :])
        neg_max = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=t, axis=1, negate=True)
        exps = nl.ndarray((P, cols), nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=exps, op=nl.exp, data=t, bias=neg_max, reduce_op=nl.add, reduce_res=total)
        inv = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=total)
        y = nl.ndarray((P, cols), x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=exps, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[r * P:(r + 1) * P, :], src=y)
    return out


# --- Triton kernels (tutorial style) -------------------------------------------------------------
@triton.jit
def triton_add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


@triton.jit
def triton_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                         BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                         GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, accumulator, mask=c_mask)


@triton.jit
def triton_softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    row_start_ptr = input_ptr + row_idx * input_row_stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    row = tl.load(row_start_ptr + col_offsets, mask=mask, other=-float("inf"))
    row_minus_max = row - tl.max(row, axis=0)
    numerator = tl.exp(row_minus_max)
    denominator = tl.sum(numerator, axis=0)
    softmax_output = numerator / denominator
    output_row_start_ptr = output_ptr + row_idx * output_row_stride
    tl.store(output_row_start_ptr + col_offsets, softmax_output, mask=mask)


@triton.jit
def triton_softmax_rows_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                               BLOCK_ROWS: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(input_ptr + rows[:, None] * input_row_stride + cols[None, :], mask=mask, other=-float("inf"))
    numerator = tl.exp(x - tl.max(x, axis=1)[:, None])
    denominator = tl.sum(numerator, axis=1)
    tl.store(output_ptr + rows[:, None] * output_row_stride + cols[None, :], numerator / denominator[:, None], mask=mask)


def triton_add(x, y, out, block_size):
    n = x.numel()
    triton_add_kernel[(triton.cdiv(n, block_size),)](x, y, out, n, BLOCK_SIZE=block_size)
    return out


def triton_matmul(a, b, c, bm, bn, bk, group_m=8):
    M, K = a.shape
    _, N = b.shape
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    triton_matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                               BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=group_m)
    return c


def triton_softmax(x, y, block_rows=None):
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    if block_rows is None:  # the tutorial: one program per row
        triton_softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, BLOCK_SIZE=block)
    else:
        triton_softmax_rows_kernel[(triton.cdiv(n_rows, block_rows),)](y, x, x.stride(0), y.stride(0), n_rows, n_cols,
                                                                       BLOCK_ROWS=block_rows, BLOCK_SIZE=block)
    return y


# --- measurement ---------------------------------------------------------------------------------
def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def measure_nki(kernel, call, repeats: int) -> dict:
    """call(kernel) runs the kernel once on numpy inputs. Cold = fresh kernel object (empty trace
    cache): trace + timing model + execute; warm = the same kernel again (trace cached)."""
    first, result = timed(lambda: call(kernel))  # the first call of this kernel in the process
    cold = min(timed(lambda: call(nki.jit(kernel.func)))[0] for _ in range(3))
    warm = best_of(lambda: call(kernel), repeats=repeats, warmup=1)
    summary = kernel.last_timing[0].summary
    return {"first": first, "cold": cold, "warm": warm, "result": result, "device_ns": summary["total_time_ns"],
            "instructions": summary["instruction_count"]}


def measure_triton(fn, repeats: int) -> dict:
    first, result = timed(fn)
    if first > SLOW_RUN_S:
        return {"first": first, "best": first, "runs": 1, "result": result}
    best = min(timed(fn)[0] for _ in range(repeats))
    return {"first": first, "best": best, "runs": repeats + 1, "result": result}


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def main() -> None:
    repeats, nki_repeats = 3, 5
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    print("NKI on neuron-sim (exact executor + timing model) vs Triton interpreter (TRITON_INTERPRET=1, CPU tensors)")
    print(f"python {platform.python_version()}, numpy {np.__version__}, torch {torch.__version__}, triton {triton.__version__}, "
          f"nki {version('nki')}, neuron-sim {version('neuron-sim')}; {os.cpu_count()} CPUs; "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, "
          f"NKI_UNINITIALIZED_READ={os.environ.get('NKI_UNINITIALIZED_READ', 'unset (warn)')}")
    print("NKI: first call = the kernel's first call in this process (trace + timing model + execute, plus one-time warm-up);")
    print(f"     cold = a fresh kernel object (empty trace cache), best of 3; warm = best of {nki_repeats} calls with the trace cached.")
    print("     The ratio uses warm; the summary also gives cold.")
    print(f"Triton: first launch, then best of {repeats} more (a job whose first launch takes > {SLOW_RUN_S:.0f} s is run once).")
    print()
    rows = []  # (job, NKI kernel, call(kernel), Triton variants, expected, tolerance)

    # vector add
    n = 1 << 20
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    out = torch.empty_like(ta)
    expected = a + b
    rows.append(("vector add 1M fp32", nki_vector_add, lambda k: k(a, b), [
        ("tutorial BLOCK_SIZE=1024", lambda: triton_add(ta, tb, out, 1024)),
        ("large blocks BLOCK_SIZE=16384", lambda: triton_add(ta, tb, out, 16384)),
    ], expected, dict(rtol=0, atol=0)))

    # matmul
    m = 1024
    A = rng.standard_normal((m, m), dtype=np.float32)
    B = rng.standard_normal((m, m), dtype=np.float32)
    tA, tB = torch.from_numpy(A), torch.from_numpy(B)
    C = torch.empty((m, m), dtype=torch.float32)
    expected = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
    rows.append(("matmul 1024^3 fp32", nki_matmul, lambda k: k(np.ascontiguousarray(A.T), B), [
        ("tutorial 128x256x64, GROUP_M=8", lambda: triton_matmul(tA, tB, C, 128, 256, 64)),
        ("large blocks 256x256x64", lambda: triton_matmul(tA, tB, C, 256, 256, 64)),
    ], expected, dict(rtol=1e-4, atol=1e-3)))

    # softmax
    r = 4096
    X = rng.standard_normal((r, r), dtype=np.float32)
    tX = torch.from_numpy(X)
    Y = torch.empty_like(tX)
    e = np.exp(X.astype(np.float64) - X.max(axis=1, keepdims=True))
    expected = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    rows.append(("row softmax 4096x4096 fp32", nki_softmax, lambda k: k(X), [
        ("tutorial, one program per row", lambda: triton_softmax(tX, Y)),
        ("large blocks, 64 rows per program", lambda: triton_softmax(tX, Y, block_rows=64)),
    ], expected, dict(rtol=1e-5, atol=1e-8)))

    verdicts = []
    for job, kernel, call, variants, expected, tol in rows:  # each job's NKI and Triton runs back to back
        nk = measure_nki(kernel, call, nki_repeats)
        np.testing.assert_allclose(nk["result"], expected, **tol, err_msg=f"NKI {job}")
        print(f"{job}: NKI first call {ms(nk['first'])}, cold {ms(nk['cold'])}, warm {ms(nk['warm'])}; simulated device time "
              f"{nk['device_ns'] / 1e3:,.1f} us ({nk['instructions']:,} instructions)")
        measured = []
        for label, fn in variants:
            tr = measure_triton(fn, repeats)
            np.testing.assert_allclose(tr["result"].numpy(), expected, **tol, err_msg=f"Triton {job} ({label})")
            note = "" if tr["runs"] > 1 else f" [first launch took > {SLOW_RUN_S:.0f} s: measured once]"
            print(f"  Triton {label}: first {ms(tr['first'])}, best {ms(tr['best'])} ({tr['runs']} runs){note}")
            measured.append((label, tr))
        for label, tr in measured:
            ratio = tr["best"] / nk["warm"]
            report(f"{job}: NKI warm vs Triton {label.split(',')[0].split(' ')[0]}", ms(nk["warm"]), ratio,
                   f"Triton {label} ({ms(tr['best'])})", f">= {TARGET:g}x")
        tutorial = measured[0][1]["best"] / nk["warm"]
        strongest = min(tr["best"] for _, tr in measured) / nk["warm"]
        cold = measured[0][1]["best"] / nk["cold"]
        verdicts.append((job, tutorial, strongest, cold))
        print()

    print("summary: ratio = Triton interpreter time / NKI warm time; the target (>= 5x on each job) is judged against the")
    print("tutorial-style Triton kernels; the strongest-variant column (incl. large blocks) is a sensitivity check")
    for job, tutorial, strongest, cold in verdicts:
        print(f"  {job:28s} vs tutorial Triton {tutorial:6.1f}x ({'met' if tutorial >= TARGET else 'NOT met'}); "
              f"vs strongest Triton variant {strongest:6.1f}x ({'met' if strongest >= TARGET else 'NOT met'}); "
              f"NKI cold vs tutorial Triton {cold:6.1f}x")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
