"""The cache trusts no file name: an entry is returned only for the request it was compiled for,
and only if it is a regular file within the size limit. Everything else is refused with a
warning and rebuilt - never loaded."""

from __future__ import annotations

import os
import threading
import warnings

import pytest
from neuron_sim.neff import Neff, NeffCache, NeffCacheWarning, cache_key
from neuron_sim.programs import tiled_matmul

MUL = cache_key("torch_neuronx.eager", "aten.mul.Tensor", "trn2", "([4, 4], float32)")
ADD = cache_key("torch_neuronx.eager", "aten.add.Tensor", "trn2", "([4, 4], float32)")


@pytest.fixture
def mul():
    return Neff(tiled_matmul(128, 128, 512), metadata={"op": "mul"})


@pytest.fixture
def add():
    return Neff(tiled_matmul(128, 128, 1024), metadata={"op": "add"})


def refused(cache: NeffCache, key, match: str):
    with pytest.warns(NeffCacheWarning, match=match) as record:
        assert cache.get(key) is None
    assert "it will be rebuilt" in str(record[0].message)
    return str(record[0].message)


def test_an_entry_records_the_request_it_was_compiled_for(tmp_path, mul):
    cache = NeffCache(tmp_path)
    cache.put(MUL, mul)
    assert Neff.load(cache.path_for(MUL)).compiled_for == MUL.parts
    assert mul.compiled_for is None  # the caller's object is not changed


def test_another_requests_neff_under_a_key_is_refused_and_rebuilt(tmp_path, mul, add):
    cache = NeffCache(tmp_path, memory_entries=0)
    cache.put(ADD, add)
    cache.path_for(MUL).parent.mkdir(parents=True, exist_ok=True)
    os.replace(cache.path_for(ADD), cache.path_for(MUL))  # a valid NEFF, under the wrong name
    message = refused(cache, MUL, "compiled for another request")
    assert '"aten.add.Tensor"' in message and '"aten.mul.Tensor"' in message  # names the part that differs
    assert cache.stats.refused_entries == 1 and cache.stats.misses == 1
    assert cache.get_or_build(MUL, lambda: mul) is mul
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert NeffCache(tmp_path).get(MUL).metadata == {"op": "mul"}


def test_an_entry_that_records_no_request_is_refused(tmp_path, mul):
    cache = NeffCache(tmp_path)
    path = cache.path_for(MUL)
    path.parent.mkdir(parents=True)
    mul.save(path)  # as an older version wrote entries, or a NEFF copied in by hand
    refused(cache, MUL, "records no request")
    assert not path.exists()


def test_a_symlink_to_another_entry_is_refused(tmp_path, mul, add):
    cache = NeffCache(tmp_path)
    cache.put(ADD, add)
    link = cache.path_for(MUL)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(cache.path_for(ADD))
    refused(NeffCache(tmp_path), MUL, "symbolic link")
    assert not link.is_symlink()  # the link is gone, what it pointed at is not
    assert NeffCache(tmp_path).get(ADD).metadata == {"op": "add"}
    NeffCache(tmp_path).put(MUL, mul)
    assert not link.is_symlink() and Neff.load(link).metadata == {"op": "mul"}


def test_a_symlink_to_a_neff_recorded_for_this_request_is_still_refused(tmp_path, mul):
    cache = NeffCache(tmp_path)
    cache.put(MUL, mul)
    path = cache.path_for(MUL)
    elsewhere = tmp_path / "elsewhere.neff"
    os.replace(path, elsewhere)
    path.symlink_to(elsewhere)
    refused(NeffCache(tmp_path), MUL, "symbolic link")
    assert elsewhere.exists()


def test_a_directory_is_refused(tmp_path, mul):
    cache = NeffCache(tmp_path)
    cache.path_for(MUL).mkdir(parents=True)
    refused(cache, MUL, r"not a regular file \(a directory\)")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_refused_without_blocking(tmp_path, mul):
    cache = NeffCache(tmp_path)
    path = cache.path_for(MUL)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    result = {}

    def read():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result["neff"] = cache.get(MUL)
        result["warnings"] = [str(w.message) for w in caught]

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(30)
    assert not reader.is_alive(), "reading a FIFO entry blocked"
    assert result["neff"] is None and "not a regular file (a FIFO)" in result["warnings"][0]
    cache.put(MUL, mul)  # the rebuilt entry replaces it
    assert Neff.load(path).metadata == {"op": "mul"}


def test_an_entry_over_the_size_limit_is_refused_unread(tmp_path, mul):
    NeffCache(tmp_path).put(MUL, mul)
    size = NeffCache(tmp_path).path_for(MUL).stat().st_size
    small = NeffCache(tmp_path, max_entry_bytes=size - 1)
    refused(small, MUL, f"holds {size} bytes, more than the limit of {size - 1} bytes")
    assert small.path_for(MUL).exists()  # not ours to delete: a process with a higher limit may have written it
    assert NeffCache(tmp_path, max_entry_bytes=64 * size).get(MUL) is not None


def test_an_entry_that_inflates_past_the_limit_is_refused(tmp_path, mul):
    NeffCache(tmp_path).put(MUL, mul)
    size = NeffCache(tmp_path).path_for(MUL).stat().st_size
    refused(NeffCache(tmp_path, max_entry_bytes=size), MUL, rf"decompress to \d+ bytes, more than the limit of {size} bytes")


def test_a_neff_over_the_size_limit_is_kept_in_memory_not_written(tmp_path, mul):
    cache = NeffCache(tmp_path, max_entry_bytes=1024)
    with pytest.warns(NeffCacheWarning, match="more than the limit of 1024 bytes per entry; keeping it in memory only"):
        cache.put(MUL, mul)
    assert not cache.path_for(MUL).exists()
    assert cache.get(MUL) is mul and cache.stats.skipped_writes == 1


def test_the_size_limit_must_be_sane(tmp_path):
    with pytest.raises(ValueError, match="max_entry_bytes must be an int above 16"):
        NeffCache(tmp_path, max_entry_bytes=0)
