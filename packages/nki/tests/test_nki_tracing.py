"""Tracing: each instruction is checked once, and errors name the kernel's own line wherever
the kernel's file lives (also in a user package whose name starts with ``nki``)."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import sys
import textwrap
import uuid
from collections import Counter

import nki
import nki.language as nl
import numpy as np
import pytest
from neuron_sim.isa import Instruction
from nki_helpers import check_error, line_of, rand

KERNEL_SOURCE = textwrap.dedent('''
    import nki
    import nki.isa as nisa
    import nki.language as nl


    def _helper(t):
        return nl.ndarray((256, 4), nl.float32, buffer=nl.sbuf)  # helper-line


    @nki.jit
    def too_many_partitions(x):
        return _helper(x)


    @nki.jit
    def wide_tile(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((129, 8), nl.float32, buffer=nl.sbuf)  # kernel-line
        nisa.dma_copy(dst=out, src=t)
        return out


    @nki.jit
    def in_no_reorder(x):
        with nl.no_reorder():
            t = nl.ndarray((200, 8), nl.float32, buffer=nl.sbuf)  # no-reorder-line
        return t
''')


def _import_from(directory: pathlib.Path):
    """Import the kernel file as module ``<directory name>.kernels`` (a user package)."""
    directory.mkdir(parents=True)
    (directory / "__init__.py").write_text("")
    path = directory / "kernels.py"
    path.write_text(KERNEL_SOURCE)
    name = f"{directory.name}.kernels"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module, str(path)


def _check_locations(module, path: str) -> None:
    x = rand((128, 8))
    with pytest.raises(nki.NkiValidationError) as err:
        module.wide_tile(x)
    check_error(err.value, "partition.limit", 129, path=path, line=line_of("kernel-line", path))
    assert __file__ not in str(err.value)  # never the caller's line
    with pytest.raises(nki.NkiValidationError) as err:
        module.too_many_partitions(x)
    check_error(err.value, "partition.limit", 256, path=path, line=line_of("helper-line", path))
    with pytest.raises(nki.NkiValidationError) as err:  # contextlib runs between nl and the kernel
        module.in_no_reorder(x)
    check_error(err.value, "partition.limit", 200, path=path, line=line_of("no-reorder-line", path))


def test_kernel_in_a_user_package_named_nki_kernels(tmp_path):
    module, path = _import_from(tmp_path / "nki_kernels")
    _check_locations(module, path)


def test_kernel_in_a_package_installed_beside_nki():
    """The layout of site-packages: ``nki_kernels_<id>/`` next to ``nki/`` shares its path prefix."""
    beside = pathlib.Path(os.path.dirname(nki.__file__) + f"_kernels_{uuid.uuid4().hex[:8]}")
    if not os.access(beside.parent, os.W_OK):
        pytest.skip(f"{beside.parent} is not writable")
    try:
        module, path = _import_from(beside)
        _check_locations(module, path)
    finally:
        shutil.rmtree(beside, ignore_errors=True)
        sys.modules.pop(f"{beside.name}.kernels", None)


def test_every_instruction_is_checked_once(monkeypatch):
    checked = Counter()
    original = Instruction.validate

    def counting(self, arch):
        checked[id(self)] += 1
        return original(self, arch)

    monkeypatch.setattr(Instruction, "validate", counting)

    @nki.jit
    def softmax_rows(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for r in nl.affine_range(x.shape[0] // 128):
            nl.store(out[r * 128:(r + 1) * 128, :], nl.softmax(nl.load(x[r * 128:(r + 1) * 128, :]), axis=1))
        return out

    x = rand((256, 64), seed=3)
    compiled = softmax_rows.compile((x,), {})
    instructions = compiled.programs[0].instructions
    assert len(instructions) > 10
    assert [checked[id(i)] for i in instructions] == [1] * len(instructions)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(softmax_rows(x), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
