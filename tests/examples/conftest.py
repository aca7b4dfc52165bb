"""The announcement's examples: ``examples_harness`` importable from the tests here
(--import-mode=importlib puts no test folder on sys.path; the name is unique in the monorepo)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
