import os
import sys

# Make ``cc_helpers`` importable from every test folder.
sys.path.insert(0, os.path.dirname(__file__))
