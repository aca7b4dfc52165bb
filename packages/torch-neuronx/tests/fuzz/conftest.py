"""Makes the fuzz suite's helper modules (``tnx_fuzz_*``, names unique across the monorepo)
importable: the tests run with --import-mode=importlib, which puts no test folder on sys.path."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
