import os
import sys

# Make ``nki_helpers`` importable from every test folder (--import-mode=importlib puts no test
# folder on sys.path). The module name is unique across the monorepo: neuron-sim's tests have
# their own ``helpers``.
sys.path.insert(0, os.path.dirname(__file__))
