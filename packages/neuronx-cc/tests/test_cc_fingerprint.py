"""The compiler's code fingerprint: one byte changed in the compiler or a frontend gives another
fingerprint, so NEFF caches keyed on it never serve what older code compiled."""

from __future__ import annotations

import os
import shutil

import neuronxcc.compiler
import pytest
from neuron_sim.fingerprint import tree_fingerprint
from neuronxcc.compiler import code_fingerprint

COMPILER = os.path.dirname(neuronxcc.compiler.__file__)
FRONTEND = os.path.join(os.path.dirname(COMPILER), "frontend")


@pytest.fixture
def trees(tmp_path):
    """Copies of the installed compiler and frontend sources."""
    copies = []
    for tree in (COMPILER, FRONTEND):
        copy = tmp_path / os.path.basename(tree)
        shutil.copytree(tree, copy, ignore=shutil.ignore_patterns("__pycache__"))
        copies.append(copy)
    return copies


def fingerprint(trees) -> str:
    return tree_fingerprint(*trees, exclude=("testing.py",))


def add_one_byte(path) -> None:
    path.write_bytes(path.read_bytes() + b"#")


def test_it_is_the_hash_of_the_compiler_and_frontend_sources(trees):
    assert code_fingerprint() == fingerprint(trees)


@pytest.mark.parametrize("source", ["compiler/driver.py", "compiler/fusion.py", "compiler/lower/matmul.py",
                                    "compiler/sbuf.py", "frontend/fx.py", "frontend/stablehlo.py"])
def test_one_byte_in_the_compiler_or_a_frontend_changes_it(trees, source):
    before = fingerprint(trees)
    add_one_byte(trees[0].parent / source)
    assert fingerprint(trees) != before


def test_its_test_helpers_do_not_count(trees):
    before = fingerprint(trees)
    add_one_byte(trees[0] / "testing.py")
    assert fingerprint(trees) == before
