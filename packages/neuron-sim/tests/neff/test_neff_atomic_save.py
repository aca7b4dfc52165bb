"""``Neff.save`` replaces files atomically: a failed write leaves the old file and no debris."""

from __future__ import annotations

import errno
import os

import pytest
from neuron_sim.neff import Neff
from neuron_sim.programs import tiled_matmul


def test_save_replaces_an_existing_file(neff, tmp_path):
    path = tmp_path / "k.neff"
    Neff(tiled_matmul(128, 128, 512)).save(path)
    neff.save(path)
    assert Neff.load(path).program.name == neff.program.name
    assert os.listdir(tmp_path) == ["k.neff"]


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_failed_save_keeps_the_old_file_and_leaves_no_temporaries(neff, tmp_path, monkeypatch, failing):
    path = tmp_path / "k.neff"
    old = Neff(tiled_matmul(128, 128, 512))
    old.save(path)

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, failing, no_space)
    with pytest.raises(OSError, match="No space left"):
        neff.save(path)
    monkeypatch.undo()
    assert Neff.load(path).program.name == old.program.name
    assert os.listdir(tmp_path) == ["k.neff"]


def test_load_of_a_missing_file_is_a_plain_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        Neff.load(tmp_path / "absent.neff")
