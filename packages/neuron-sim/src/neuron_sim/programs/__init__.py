"""Ready-made programs: reference workloads for demos, tests and benchmarks."""

from .copy import dependent_chain, hbm_to_sbuf_copy
from .matmul import tiled_matmul

__all__ = ["tiled_matmul", "hbm_to_sbuf_copy", "dependent_chain"]
