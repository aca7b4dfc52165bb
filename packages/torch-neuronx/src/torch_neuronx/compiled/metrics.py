"""Counters of the eager path, as ``torch_neuronx.compile_metrics()`` is for ``torch.compile``.

    torch_neuronx.eager_metrics()
    # {"compiled": 41, "disk_hits": 0, "hits": 12873, "not_lowerable": 2, "compile_seconds": 7.9,
    #  "adaptive": {"runs": 3, "ops": 120, "fused_compiles": 1, "dead_outputs": 30, "split_runs": 0}}

``compiled``: op signatures traced and compiled into a NEFF in this process; ``disk_hits``: found
in the NEFF disk cache instead; ``hits``: calls served by a NEFF already in memory;
``not_lowerable``: signatures refused (they run through CPU fallback); ``compile_seconds``: time
spent building. ``adaptive``: runs launched, ops in them, fused NEFFs compiled, results never
written (nobody held them), runs launched op by op because fusing would have been slower.
"""

from __future__ import annotations

import dataclasses

from . import adaptive
from .cache import CACHE


def eager_metrics() -> dict:
    """The eager path's counters since the process started (a snapshot)."""
    return {**dataclasses.asdict(CACHE.stats), "adaptive": dict(adaptive.stats)}
