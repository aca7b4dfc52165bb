"""The fast executor (``NEURON_SIM_MODE=fast``) and all its host-speed machinery:

* ``executor.py``: the executor and ``evaluate`` (a graph over buffers);
* ``plan.py``: a graph's evaluation plan, made once (constants folded, temporaries pooled,
  results written straight into their buffers);
* ``split.py``: runs of elementwise steps evaluated as two halves at once;
* ``ops.py``: host-speed forms of graph ops (composite activations in chunks or halves, a large
  matmul's halves at once) - the same bits as ``graph/ops.py``;
* ``spare_core.py``: the second host thread, used only while a thread waits for the device.
"""

from .executor import FastExecutor, evaluate
from .plan import BufferPool, PlanSummary, explain

__all__ = ["FastExecutor", "evaluate", "explain", "PlanSummary", "BufferPool"]
