"""The fast executor: evaluates a program's graph-level form over whole tensors.

Inputs and outputs are zero-copy numpy views of the launch's buffers (device memory); each op
runs once over whole tensors with the numerics of ``graph/ops.py``, through a plan prepared once
per graph (``plan.py``: constants evaluated once, temporaries reused, results written in place).
Timing never comes from here - it always comes from the program's ISA, so fast and exact runs
report the same device time.
"""

from __future__ import annotations

import numpy as np

from ...graph import Graph, graph_of
from ..protocol import RunReport
from .plan import BufferPool, plan_of

_NOTHING = RunReport()


def evaluate(graph: Graph, buffers: dict[str, np.ndarray], pool: BufferPool | None = None) -> None:
    """Evaluate ``graph`` over ``buffers`` (contiguous arrays by tensor name, e.g. flat uint8);
    ``pool`` keeps temporaries for reuse by later calls (see ``plan.py``)."""
    plan_of(graph).run(buffers, pool)


class FastExecutor:
    """The executor of ``NEURON_SIM_MODE=fast``. A device runs one program at a time on it, so its
    pool of temporaries needs no lock."""

    def __init__(self, arch=None):
        self.arch = arch
        self.pool = BufferPool()

    def run(self, program, buffers) -> RunReport:
        plan_of(graph_of(program)).run(buffers, self.pool)
        return _NOTHING
