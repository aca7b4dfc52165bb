"""NKI kernels the tests profile (their lines are what the source viewer shows)."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def scale_add(a_input, b_input):
    out = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    a = nl.ndarray(a_input.shape, a_input.dtype, buffer=nl.sbuf)
    b = nl.ndarray(b_input.shape, b_input.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=a_input)
    nisa.dma_copy(dst=b, src=b_input)
    nisa.activation(dst=a, op=nl.exp, data=a)
    nisa.tensor_tensor(dst=a, data1=a, data2=b, op=nl.add)
    nisa.dma_copy(dst=out, src=a)
    return out


@nki.jit
def matmul_kernel(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    for k in range(K // 128):
        a = nl.ndarray((128, M), lhsT.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, N), rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=lhsT[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=b, src=rhs[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(dst=acc, stationary=a, moving=b, accumulate=k > 0)
    res = nl.ndarray((M, N), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=result, src=res)
    return result
