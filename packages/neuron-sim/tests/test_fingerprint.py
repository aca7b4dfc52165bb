"""Code fingerprints: one byte changed in code that shapes a NEFF or its timing gives another
fingerprint (so cached NEFFs and recorded timings of the old code are not reused); code that
only runs programs, bytecode and caches do not count."""

from __future__ import annotations

import os
import shutil

import neuron_sim
import pytest
from neuron_sim.fingerprint import RUNS_PROGRAMS, code_fingerprint, tree_fingerprint

PACKAGE = os.path.dirname(neuron_sim.__file__)


@pytest.fixture
def tree(tmp_path):
    """A copy of the installed neuron_sim sources."""
    copy = tmp_path / "neuron_sim"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def fingerprint(tree) -> str:
    return tree_fingerprint(tree, exclude=RUNS_PROGRAMS)


def change_one_byte(path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle] = ord("#") if data[middle] != ord("#") else ord(" ")
    path.write_bytes(bytes(data))


def test_it_is_the_hash_of_the_package_sources(tree):
    assert code_fingerprint() == fingerprint(tree)


def test_what_it_leaves_out_exists():
    # A stale entry would hide nothing today and a renamed module's new path tomorrow.
    assert [p for p in RUNS_PROGRAMS if not os.path.exists(os.path.join(PACKAGE, p))] == []


@pytest.mark.parametrize("source", [
    "isa/vector.py",  # ISA validation and semantics
    "isa/tensor_engine.py",
    "builder.py",  # the program builder
    "program.py",
    "timing/model.py",  # the timing model
    "timing/costs.py",
    "arch/trn2.py",  # architecture tables
    "arch/spec.py",
    "graph/ops.py",  # the graph op registry the compiler reads
    "neff/format.py",  # the NEFF format
])
def test_one_byte_in_code_that_shapes_a_neff_changes_it(tree, source):
    before = fingerprint(tree)
    change_one_byte(tree / source)
    assert fingerprint(tree) != before


def test_a_new_module_changes_it(tree):
    before = fingerprint(tree)
    (tree / "isa" / "new_engine.py").write_text("RULE = 1\n")
    assert fingerprint(tree) != before


@pytest.mark.parametrize("source", ["runtime/queue.py", "trace/records.py"])
def test_code_that_only_runs_programs_does_not_count(tree, source):
    before = fingerprint(tree)
    change_one_byte(tree / source)
    assert fingerprint(tree) == before


def test_bytecode_caches_and_hidden_files_do_not_count(tree):
    before = fingerprint(tree)
    (tree / "isa" / "__pycache__").mkdir()
    (tree / "isa" / "__pycache__" / "vector.cpython-311.pyc").write_bytes(b"\x00" * 16)
    (tree / "isa" / ".vector.py.swp").write_bytes(b"swap")
    assert fingerprint(tree) == before


def test_a_file_renamed_changes_it(tree):
    before = fingerprint(tree)
    os.rename(tree / "isa" / "erf.py", tree / "isa" / "erf2.py")
    assert fingerprint(tree) != before
