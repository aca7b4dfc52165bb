"""Errors about using the runtime wrongly (as opposed to a launched program failing)."""

from __future__ import annotations

from ..errors import NeuronSimError


class RuntimeUsageError(NeuronSimError, RuntimeError):
    """The runtime was used in a way it does not support (e.g. timing an event never recorded)."""


class ForkedProcessError(RuntimeUsageError):
    """The runtime was created in a parent process and used in a forked child."""


FORK_MESSAGE = (
    "the neuron_sim runtime was initialized in process {parent} and cannot be used in forked child process "
    "{child}: its queue worker threads and locks do not survive fork(). Start worker processes with the "
    "'spawn' start method (multiprocessing.set_start_method(\"spawn\") or a get_context(\"spawn\") pool), or "
    "initialize the runtime only inside the children."
)
