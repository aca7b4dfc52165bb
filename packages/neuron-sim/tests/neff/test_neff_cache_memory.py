"""What a foreign or crafted cache entry can cost in memory: the size limit is checked before a
file is read and before its sections are decompressed, and a foreign file is refused after 16
bytes. Each read runs in a fresh process that reports its peak-RSS growth; a control run with a
limit high enough to let the same entry through shows the measurement would see the cost."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from neuron_sim.neff import DEFAULT_MAX_ENTRY_BYTES, NEFF_MAGIC, NEFF_VERSION, Neff, NeffCache, cache_key
from neuron_sim.neff.container import unpack
from neuron_sim.programs import tiled_matmul

READER = str(Path(__file__).with_name("cache_reader.py"))
pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak RSS is read from /proc/self/status")
PARTS = ["memory-bound-test", [128, 128, 512]]
KEY = cache_key(*PARTS)
MIB = 1 << 20
NOISE_MIB = 24  # what one get() of a small entry may grow the peak RSS by (imports done before)


def read_in_fresh_process(directory, max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES) -> dict:
    out = subprocess.run([sys.executable, READER, str(directory), str(max_entry_bytes), json.dumps(PARTS)],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def zeros_stream(size: int) -> bytes:
    """A zlib stream that inflates to more than ``size`` zero bytes, made without compressing them
    all: after a full flush a deflate block is independent of the ones before, so one 1 MiB block
    repeats. (Its Adler-32 is wrong; an inflater only finds out at the very end.)"""
    deflate = zlib.compressobj(9)
    first = deflate.compress(bytes(MIB)) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(bytes(MIB)) + deflate.flush(zlib.Z_FULL_FLUSH)
    return first + block * (size // MIB) + deflate.flush()


def write_crafted_entry(path: Path, declared: int) -> int:
    """An intact, checksummed entry for KEY whose program section inflates to ``declared`` bytes."""
    header, _ = unpack(Neff(tiled_matmul(128, 128, 512), compiled_for=KEY.parts).to_bytes(), "template")
    payload = zeros_stream(declared)
    header["sections"] = [{"name": "program", "offset": 0, "length": len(payload), "raw_length": declared,
                           "encoding": "json+zlib"}]
    header_bytes = json.dumps(header).encode()
    body = struct.pack("<8sII", NEFF_MAGIC, NEFF_VERSION, len(header_bytes)) + header_bytes + payload
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body + hashlib.sha256(body).digest())
    return path.stat().st_size


def sparse_file(path: Path, size: int, head: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)  # no disk blocks: reading it would still fill memory


def test_a_small_entry_that_inflates_past_the_limit_is_not_decompressed(tmp_path):
    path = NeffCache(tmp_path).path_for(KEY)
    size = write_crafted_entry(path, 300 * MIB)
    assert size < MIB  # what the issue found: a small file that inflates to hundreds of MiB
    result = read_in_fresh_process(tmp_path)
    assert not result["hit"] and result["growth_mib"] < NOISE_MIB
    assert f"decompress to {300 * MIB} bytes, more than the limit of {DEFAULT_MAX_ENTRY_BYTES} bytes" in result["warnings"][0]


def test_control_the_same_entry_under_a_higher_limit_costs_its_size(tmp_path):
    # The measurement can fail: let the crafted entry through and its inflated size shows up.
    path = NeffCache(tmp_path).path_for(KEY)
    write_crafted_entry(path, 300 * MIB)
    result = read_in_fresh_process(tmp_path, max_entry_bytes=1 << 30)
    assert not result["hit"] and result["growth_mib"] > 250, result


@pytest.mark.parametrize("declared", [2 << 30, 1 << 46])
def test_a_claimed_huge_size_is_refused_from_the_header(tmp_path, declared):
    path = NeffCache(tmp_path).path_for(KEY)
    write_crafted_entry(path, 4 * MIB)  # inflates to 4 MiB, claims more
    data = bytearray(path.read_bytes())
    header, _ = unpack(data, "entry")
    header["sections"][0]["raw_length"] = declared
    header_bytes = json.dumps(header).encode()
    payload = bytes(data[16 + struct.unpack_from("<I", data, 12)[0]: -32])
    body = struct.pack("<8sII", NEFF_MAGIC, NEFF_VERSION, len(header_bytes)) + header_bytes + payload
    path.write_bytes(body + hashlib.sha256(body).digest())
    result = read_in_fresh_process(tmp_path)
    assert not result["hit"] and result["growth_mib"] < NOISE_MIB
    assert f"decompress to {declared} bytes" in result["warnings"][0]


def test_a_huge_file_is_refused_unread(tmp_path):
    path = NeffCache(tmp_path).path_for(KEY)
    sparse_file(path, 1 << 30, NEFF_MAGIC)  # 1 GiB, starting like a NEFF
    result = read_in_fresh_process(tmp_path)
    assert not result["hit"] and result["growth_mib"] < NOISE_MIB
    assert f"holds {1 << 30} bytes, more than the limit" in result["warnings"][0]
    assert path.exists()  # not ours to delete: a process with a higher limit may have written it


def test_a_foreign_file_under_the_limit_is_refused_after_its_first_bytes(tmp_path):
    path = NeffCache(tmp_path).path_for(KEY)
    sparse_file(path, 200 * MIB, b"\x89PNG\r\n\x1a\n")
    result = read_in_fresh_process(tmp_path)
    assert not result["hit"] and result["growth_mib"] < NOISE_MIB
    assert "looks like a PNG image" in result["warnings"][0]
    assert not path.exists()  # unusable: deleted, to be rebuilt


def test_a_real_entry_is_read(tmp_path):
    NeffCache(tmp_path).put(KEY, Neff(tiled_matmul(128, 128, 512)))
    result = read_in_fresh_process(tmp_path)
    assert result["hit"] and result["warnings"] == []
