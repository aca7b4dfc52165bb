"""The fuzz suite's test setup.

* Its helper modules (``tnx_fuzz_*``, names unique across the monorepo) are importable: the tests
  run with --import-mode=importlib, which puts no test folder on sys.path.
* In the CI profile the programs are the same whatever else the session imports. Hypothesis
  (6.13x) also draws constants it finds in every local module loaded so far, so which tests ran
  before, or any number anyone adds to any module, would change the fixed set of programs CI
  runs. Here they come from hypothesis's own constants only (the long profile keeps both).
* The run's tally (``tnx_fuzz_tally``: programs per mode, clean, excused by which row) is in
  pytest's summary, and in ``$TNX_FUZZ_TALLY`` when set.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from tnx_fuzz_profiles import EXAMPLES_ENV, profile  # noqa: E402
from tnx_fuzz_tally import TALLY  # noqa: E402


def pytest_configure(config):
    TALLY.meta.update(profile=profile(), seed=config.getoption("--hypothesis-seed", None),
                      examples=os.environ.get(EXAMPLES_ENV))


def pytest_terminal_summary(terminalreporter):
    if TALLY.modes:
        terminalreporter.write_sep("-", "fuzz programs")
        for line in TALLY.summary():
            terminalreporter.write_line(line)


@pytest.fixture(autouse=True, scope="module")  # module scope: set before the modules' own fixtures draw programs
def programs_independent_of_the_session():
    if profile() != "ci":
        yield
        return
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(providers, "_get_local_constants", Constants)
        providers.CONSTANTS_CACHE.cache.clear()
        yield
    providers.CONSTANTS_CACHE.cache.clear()
