"""The exact executor on a 1024x1024x1024 fp32 tiled matmul program vs one numpy matmul of the
same size, measured in the same run (target: within 3x).

Both sides use one BLAS thread (unless OPENBLAS_NUM_THREADS is set): the executor's matmuls are
128x128x512 tiles, one per instruction, which a second BLAS thread does not speed up, while the
single big numpy matmul would get both cores - and on a busy 2-core machine the threaded figures
swing by 2x from run to run.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads its BLAS

import numpy as np  # noqa: E402
from _harness import best_of, report
from neuron_sim import ExactExecutor, get_architecture
from neuron_sim.programs import tiled_matmul


def main() -> None:
    arch = get_architecture("trn2")
    n = 1024
    program = tiled_matmul(n, n, n, dtype="float32", arch=arch)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    out = np.empty((n, n), dtype=np.float32)
    buffers = {
        "lhsT": np.ascontiguousarray(a.T).view(np.uint8).reshape(-1),
        "rhs": b.view(np.uint8).reshape(-1),
        "out": out.view(np.uint8).reshape(-1),
    }
    executor = ExactExecutor(arch)
    t_exact = best_of(lambda: executor.run(program, buffers))
    t_numpy = best_of(lambda: a @ b)
    np.testing.assert_allclose(out, a @ b, rtol=2e-4, atol=2e-3)
    print(f"exact executor vs numpy (best of 5, OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']})")
    report(f"tiled matmul {n}^3 fp32 ({len(program.instructions)} instructions)", f"{t_exact * 1e3:.1f} ms",
           t_exact / t_numpy, f"numpy matmul ({t_numpy * 1e3:.1f} ms)", "<= 3x")


if __name__ == "__main__":
    main()
