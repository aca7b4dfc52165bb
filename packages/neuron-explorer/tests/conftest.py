import os
import sys

# Make ``explorer_helpers`` and ``kernels`` importable from every test folder.
sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402
from explorer_helpers import mixed_run  # noqa: E402
from neuron_explorer import open_profile  # noqa: E402


@pytest.fixture(scope="session")
def mixed_session(tmp_path_factory):
    """One capture of a small mixed run (tiled matmuls, NKI kernels, a semaphore program, host work,
    copies, two cores), shared by the tests that only read it."""
    return mixed_run(tmp_path_factory.mktemp("mixed"))


@pytest.fixture(scope="session")
def mixed_profile(mixed_session):
    return open_profile(mixed_session.session_dir)
