import os
import sys

import pytest
from neuron_sim.trace import global_sink

# Make ``nki_helpers`` importable from every test folder (--import-mode=importlib puts no test
# folder on sys.path). The module name is unique across the monorepo: neuron-sim's tests have
# their own ``helpers``.
sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def records():
    """Every runtime launch record published while the test runs."""
    seen = []
    handle = global_sink().subscribe(seen.append)
    yield seen
    global_sink().unsubscribe(handle)
