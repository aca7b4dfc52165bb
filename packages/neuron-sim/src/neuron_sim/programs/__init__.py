"""Ready-made programs: reference workloads for demos, tests and benchmarks."""

from .matmul import tiled_matmul
from .copy import hbm_to_sbuf_copy, dependent_chain

__all__ = ["tiled_matmul", "hbm_to_sbuf_copy", "dependent_chain"]
