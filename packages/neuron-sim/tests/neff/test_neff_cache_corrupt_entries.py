"""A corrupt, foreign or old-version cache entry is reported, deleted and rebuilt."""

from __future__ import annotations

import os
import struct
import warnings

import pytest
from neuron_sim.neff import Neff, NeffCache, NeffCacheWarning, cache_key

KEY = cache_key("corrupt-entry-test")


def _store(tmp_path, neff) -> NeffCache:
    cache = NeffCache(tmp_path)
    cache.put(KEY, neff)
    return cache


def test_flipped_byte_is_detected_and_the_file_removed(tmp_path, neff):
    path = _store(tmp_path, neff).path_for(KEY)
    data = bytearray(path.read_bytes())
    data[200] ^= 0xFF
    path.write_bytes(bytes(data))
    cache = NeffCache(tmp_path)  # empty memory layer: must go to disk
    with pytest.warns(NeffCacheWarning) as record:
        assert cache.get(KEY) is None
    message = str(record[0].message)
    assert str(path) in message and "checksum mismatch" in message and "rebuilt" in message
    assert not path.exists()
    assert cache.stats.corrupt_entries == 1 and cache.stats.misses == 1


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda data: b"", "empty"),
        (lambda data: data[: len(data) // 2], "truncated"),
        (lambda data: b"\x89PNG\r\n\x1a\n" + data[8:], "PNG"),
        (lambda data: data[:8] + struct.pack("<I", 99) + data[12:], "version 99 is not supported"),
    ],
)
def test_get_or_build_rebuilds_unusable_entries(tmp_path, neff, damage, reason):
    path = _store(tmp_path, neff).path_for(KEY)
    path.write_bytes(damage(path.read_bytes()))
    cache = NeffCache(tmp_path)
    with pytest.warns(NeffCacheWarning, match=reason):
        rebuilt = cache.get_or_build(KEY, lambda: neff)
    assert rebuilt is neff
    assert Neff.load(path).metadata == neff.metadata  # the good NEFF replaced the bad file
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert NeffCache(tmp_path).get(KEY) is not None


def test_a_replacement_written_meanwhile_is_not_deleted(tmp_path, neff, monkeypatch):
    """If another process replaces the bad file between our read and our delete, keep its file."""
    from neuron_sim.neff import cache as cache_module

    cache = _store(tmp_path, neff)
    path = cache.path_for(KEY)
    good = path.read_bytes()
    damaged = bytearray(good)
    damaged[-1] ^= 0xFF  # a bad checksum, found after the file was read
    path.write_bytes(bytes(damaged))
    real_unpack = cache_module.unpack

    def unpack_then_replace(data, source):
        try:
            return real_unpack(data, source)
        finally:
            replacement = path.with_name("replacement")
            replacement.write_bytes(good)
            os.replace(replacement, path)  # the "other process" writes a good entry

    monkeypatch.setattr(cache_module, "unpack", unpack_then_replace)
    with pytest.warns(NeffCacheWarning):
        assert NeffCache(tmp_path).get(KEY) is None
    monkeypatch.undo()
    assert path.read_bytes() == good
