"""The import name of NKI's CPU simulator package, served by nki: ``nki_cpu_simulator.nki`` and
every ``nki_cpu_simulator.nki.X`` are ``nki`` and ``nki.X`` (code that picks the simulator by
importing it - nki-library's ``--test-mode simulation`` - runs on neuron-sim)."""

import sys

import nki
from nki import aliases as _aliases

sys.modules[__name__ + ".nki"] = nki
_aliases.alias(__name__ + ".nki")

__all__ = ["nki"]
