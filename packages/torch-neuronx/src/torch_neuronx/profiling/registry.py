"""The live NeuronConfigs by id, and finding the one a Kineto custom config string names.

Kept apart from ``config`` (which imports neuron-explorer and pyarrow) so that the activity
profiler's window (``kineto_window``) imports nothing heavy: it is imported with torch_neuronx,
before any torch.profiler session starts (see ``kineto_window``).
"""

from __future__ import annotations

import itertools
import threading
import weakref

KEY = "neuron_config"

_ids = itertools.count(1)
_configs: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_lock = threading.Lock()


def register(config) -> int:
    """A new id naming ``config`` (a NeuronConfig) for as long as it lives."""
    with _lock:
        config_id = next(_ids)
        _configs[config_id] = config
    return config_id


def config_from_custom(text: str):
    """The NeuronConfig a Kineto custom config string names (None: the profile has none)."""
    fields = dict(part.split(":", 1) for part in text.split(";") if ":" in part)
    if KEY not in fields:
        return None
    try:
        config = _configs.get(int(fields.get(KEY, "")))
    except ValueError:
        config = None
    if config is None:
        raise ValueError(f"torch.profiler custom config {text!r} names no live NeuronConfig; pass "
                         f"experimental_config=NeuronConfig(...)")
    return config
