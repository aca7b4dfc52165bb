"""Functional executors behind one protocol (``protocol``), listed in one registry (``registry``):

* ``exact`` (``exact.py``, ``semantics.py``): instruction by instruction, the hardware's numerics;
* ``fast`` (the ``fast`` subpackage): a program's graph-level form over whole tensors, with the
  host-speed machinery (plans, split runs, BLAS threads, the spare core) kept inside it, so
  ``isa/`` and ``graph/ops.py`` stay the hardware's definition.
"""

from .exact import ExactExecutor
from .fast import FastExecutor
from .protocol import Executor, ExecutorSpec, RunReport
from .registry import known_modes, register_executor, resolve, unregister_executor

__all__ = ["Executor", "ExecutorSpec", "RunReport", "ExactExecutor", "FastExecutor",
           "register_executor", "unregister_executor", "known_modes", "resolve"]
