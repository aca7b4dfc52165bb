"""NeffCache: memory hits, disk hits across instances, misses, LRU bound, keys, clear."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from neuron_sim.neff import CacheKey, CacheStats, Neff, NeffCache, cache_key
from neuron_sim.programs import tiled_matmul

KEY = cache_key("matmul", [256, 256, 512], "bfloat16")


def _small(i: int) -> Neff:
    return Neff(tiled_matmul(128, 128, 512), metadata={"i": i})


def test_miss_then_memory_hit(tmp_path, neff):
    cache = NeffCache(tmp_path)
    assert cache.get(KEY) is None
    cache.put(KEY, neff)
    assert cache.get(KEY) is neff
    assert cache.stats == CacheStats(hits=1, misses=1, disk_hits=0)


def test_disk_hit_from_another_instance(tmp_path, neff):
    NeffCache(tmp_path).put(KEY, neff)
    other = NeffCache(tmp_path)
    got = other.get(KEY)
    assert got is not None and got is not neff
    assert [i.to_dict() for i in got.program.instructions] == [i.to_dict() for i in neff.program.instructions]
    assert got.timing_summary == neff.timing_summary
    assert other.stats == CacheStats(hits=1, misses=0, disk_hits=1)
    assert other.get(KEY) is got  # now served from memory
    assert other.stats == CacheStats(hits=2, misses=0, disk_hits=1)


def test_sharded_layout(tmp_path, neff):
    cache = NeffCache(tmp_path)
    cache.put(KEY, neff)
    path = tmp_path / KEY.hex[:2] / KEY.hex[2:4] / f"{KEY.hex}.neff"
    assert cache.path_for(KEY) == path
    assert Neff.load(path).metadata == neff.metadata


def test_get_or_build_builds_once(tmp_path):
    calls = []

    def build():
        calls.append(1)
        return _small(0)

    first = NeffCache(tmp_path).get_or_build(KEY, build)
    second = NeffCache(tmp_path).get_or_build(KEY, build)
    assert len(calls) == 1
    assert second.metadata == first.metadata == {"i": 0}


def test_get_or_build_requires_a_neff(tmp_path):
    with pytest.raises(TypeError, match="build_fn must return a Neff, got dict"):
        NeffCache(tmp_path).get_or_build(KEY, dict)


def test_memory_layer_is_a_bounded_lru(tmp_path):
    cache = NeffCache(tmp_path, memory_entries=2)
    keys = [cache_key(i) for i in range(3)]
    for i, key in enumerate(keys):
        cache.put(key, _small(i))
    cache.get(keys[0])  # evicted from memory: comes back from disk
    assert cache.stats.disk_hits == 1
    cache.get(keys[0])
    assert cache.stats.disk_hits == 1


def test_memory_only_hits_do_not_touch_disk(tmp_path, neff):
    cache = NeffCache(tmp_path)
    cache.put(KEY, neff)
    cache.path_for(KEY).unlink()
    assert cache.get(KEY) is neff


def test_zero_memory_entries_always_reads_disk(tmp_path, neff):
    cache = NeffCache(tmp_path, memory_entries=0)
    cache.put(KEY, neff)
    cache.get(KEY)
    cache.get(KEY)
    assert cache.stats.disk_hits == 2


def test_clear_removes_entries_but_not_foreign_files(tmp_path, neff):
    (tmp_path / "notes.txt").write_text("mine")
    cache = NeffCache(tmp_path)
    cache.put(KEY, neff)
    stale = cache.path_for(KEY).parent / f".{KEY.hex}.neff.123.abcdef.tmp"
    stale.write_bytes(b"partial")
    cache.clear()
    assert cache.get(KEY) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_clear_on_a_missing_directory(tmp_path):
    NeffCache(tmp_path / "never-created").clear()


@pytest.mark.parametrize("bad", ["", "abc", "../../etc/passwd", "ABCDEF0123", "g" * 64, 123])
def test_keys_must_be_hex(tmp_path, neff, bad):
    with pytest.raises(ValueError, match="lowercase hex"):
        NeffCache(tmp_path).put(CacheKey(bad, "[]"), neff)


def test_keys_are_cache_keys_not_strings(tmp_path, neff):
    # A bare file name says nothing about the request: the cache could not check what it loads.
    with pytest.raises(TypeError, match="CacheKey objects made by cache_key"):
        NeffCache(tmp_path).get(KEY.hex)


def test_cache_key_is_stable_and_order_insensitive_for_dicts():
    a = cache_key("op", {"b": 1, "a": [1, 2]}, b"source")
    b = cache_key("op", {"a": [1, 2], "b": 1}, b"source")
    assert a == b and len(a.hex) == 64 and int(a.hex, 16) >= 0 and str(a) == a.hex
    assert a != cache_key("op", {"a": [1, 2], "b": 2}, b"source")
    assert a != cache_key("op", {"a": [1, 2], "b": 1}, b"other source")
    assert cache_key(np.int64(3)) == cache_key(3)
    # Pinned across runs and machines: a change here silently invalidates every user's cache,
    # so it must be deliberate.
    pinned = "489790529898474c921ed6bdda5f69c89818b29a9c1678f2dcdc7ed36f7d6ecc"
    assert cache_key("x", {"b": [1, 2.5, None], "a": True}).hex == pinned


def test_cache_key_refuses_unstable_parts():
    with pytest.raises(TypeError, match="JSON-able"):
        cache_key({1, 2})
    with pytest.raises(TypeError, match="JSON-able"):
        cache_key(object())


def test_put_from_many_threads_and_read_back(tmp_path):
    cache = NeffCache(tmp_path, memory_entries=4)
    keys = [cache_key("t", i) for i in range(16)]
    barrier = threading.Barrier(8)
    errors = []

    def work(t: int) -> None:
        try:
            barrier.wait()
            for i, key in enumerate(keys):
                cache.get_or_build(key, lambda i=i: _small(i))
        except Exception as err:  # noqa: BLE001 - collected and asserted on in the main thread
            errors.append(err)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    fresh = NeffCache(tmp_path)
    assert [fresh.get(k).metadata["i"] for k in keys] == list(range(16))
    stats = cache.stats
    assert stats.hits + stats.misses == 8 * 16
