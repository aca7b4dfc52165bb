"""A full or read-only disk degrades the cache to memory-only with one warning, never an error."""

from __future__ import annotations

import errno
import os
import warnings

import pytest
from neuron_sim.neff import NeffCache, NeffCacheWarning, cache_key


def _raise(code: int):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    return fail


@pytest.mark.parametrize("failing, code", [("replace", errno.ENOSPC), ("fsync", errno.ENOSPC), ("open", errno.EROFS)])
def test_write_failure_keeps_working_from_memory(tmp_path, neff, monkeypatch, failing, code):
    cache = NeffCache(tmp_path)
    monkeypatch.setattr(os, failing, _raise(code))
    keys = [cache_key("disk-full", i) for i in range(3)]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for key in keys:
            cache.put(key, neff)
    monkeypatch.undo()
    assert [w.category for w in record] == [NeffCacheWarning]  # one warning for three failures
    assert os.strerror(code) in str(record[0].message)
    assert "memory only" in str(record[0].message)
    assert all(cache.get(key) is neff for key in keys)
    assert cache.stats.write_failures == 3
    leftovers = [name for _, _, files in os.walk(tmp_path) for name in files]
    assert leftovers == []  # no partial or temporary files


def test_get_or_build_with_a_full_disk(tmp_path, neff, monkeypatch):
    cache = NeffCache(tmp_path)
    monkeypatch.setattr(os, "replace", _raise(errno.ENOSPC))
    calls = []
    with pytest.warns(NeffCacheWarning, match="memory only"):
        first = cache.get_or_build(cache_key("k"), lambda: calls.append(1) or neff)
    again = [cache.get_or_build(cache_key("k"), lambda: calls.append(1) or neff) for _ in range(2)]
    assert first is neff and again == [neff, neff] and len(calls) == 1


def test_cache_directory_that_is_a_file(tmp_path, neff):
    blocker = tmp_path / "cache"
    blocker.write_text("not a directory")
    cache = NeffCache(blocker)
    key = cache_key("blocked")
    with pytest.warns(NeffCacheWarning, match="cannot write NEFF cache entry"):
        cache.put(key, neff)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.get(key) is neff
        assert cache.get(cache_key("other")) is None  # a miss, not a crash


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_directory(tmp_path, neff):
    tmp_path.chmod(0o500)
    try:
        cache = NeffCache(tmp_path)
        with pytest.warns(NeffCacheWarning):
            cache.put(cache_key("ro"), neff)
        assert cache.get(cache_key("ro")) is neff
    finally:
        tmp_path.chmod(0o700)
