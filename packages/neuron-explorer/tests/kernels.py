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
def matmul_relu(lhsT, rhs):
    """relu(lhsT.T @ rhs): every K tile is loaded before the first matmul (the DMA queues run ahead
    of TensorE), the tiles accumulate in one PSUM bank, and ScalarE applies relu on the way out."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    tiles = [(nl.load(lhsT[k * 128:(k + 1) * 128, :]), nl.load(rhs[k * 128:(k + 1) * 128, :])) for k in range(K // 128)]
    acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    for k, (stationary, moving) in enumerate(tiles):
        nisa.nc_matmul(dst=acc, stationary=stationary, moving=moving, accumulate=k > 0)
    activated = nl.ndarray((M, N), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=activated, op=nl.relu, data=acc)
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=activated)
    return out
