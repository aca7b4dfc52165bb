import os
import sys

# Make ``nkilib_helpers`` importable from every test folder (--import-mode=importlib puts no test
# folder on sys.path); the name is unique across the monorepo.
sys.path.insert(0, os.path.dirname(__file__))
