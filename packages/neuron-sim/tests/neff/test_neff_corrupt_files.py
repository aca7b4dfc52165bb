"""Every way a NEFF can be wrong raises NeffFormatError naming the file and the fault.

Never a KeyError, struct.error, zlib.error or JSON error from deep inside, and never wrong data.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from neuron_sim.errors import NeffFormatError
from neuron_sim.neff import NEFF_MAGIC, Neff
from neuron_sim.neff.container import CHECKSUM_SIZE, PREAMBLE_SIZE, unpack
from neuron_sim.programs import tiled_matmul

# Module-level (not fixtures) for the hypothesis tests, which must not share function fixtures.
_SMALL_NEFF = Neff(tiled_matmul(128, 128, 512), metadata={"k": 1}).to_bytes()


def _reseal(data: bytes) -> bytes:
    return data[:-CHECKSUM_SIZE] + hashlib.sha256(data[:-CHECKSUM_SIZE]).digest()


def _load_file(tmp_path, data: bytes, name: str = "bad.neff"):
    path = tmp_path / name
    path.write_bytes(data)
    return Neff.load(path)


def test_empty_file(tmp_path):
    with pytest.raises(NeffFormatError, match=r"bad\.neff: the file is empty"):
        _load_file(tmp_path, b"")


@pytest.mark.parametrize(
    "head, what",
    [
        (b"\x89PNG\r\n\x1a\n" + bytes(64), "PNG image"),
        (b"\x7fELF\x02\x01\x01\x00" + bytes(64), "ELF binary"),
        (b"\x80\x04\x95" + bytes(64), "pickle"),
        (b'{"format": "neuron-sim-neff"}', "JSON"),
        (b"hello world, not a neff", "not a NEFF"),
    ],
)
def test_foreign_file(tmp_path, head, what):
    with pytest.raises(NeffFormatError, match="not a NEFF file") as err:
        _load_file(tmp_path, head, "foreign.bin")
    assert "foreign.bin" in str(err.value)
    assert what in str(err.value)


def test_every_truncation_is_reported_as_truncated(neff_bytes):
    for length in range(1, len(neff_bytes)):
        with pytest.raises(NeffFormatError, match="truncated"):
            Neff.from_bytes(neff_bytes[:length], source="cut.neff")


def test_truncated_file_names_the_file(tmp_path, neff_bytes):
    with pytest.raises(NeffFormatError, match=r"short\.neff: truncated NEFF: 100 bytes"):
        _load_file(tmp_path, neff_bytes[:100], "short.neff")


def test_trailing_bytes(neff_bytes):
    with pytest.raises(NeffFormatError, match="3 unexpected bytes after its end"):
        Neff.from_bytes(neff_bytes + b"abc")


def test_bad_checksum(tmp_path, neff_bytes):
    data = bytearray(neff_bytes)
    data[len(data) // 2] ^= 0x01
    with pytest.raises(NeffFormatError, match=r"flipped\.neff: NEFF checksum mismatch"):
        _load_file(tmp_path, bytes(data), "flipped.neff")


def test_a_flipped_byte_anywhere_is_detected(neff_bytes):
    for index in range(len(neff_bytes)):
        for mask in (0x01, 0x80):
            data = bytearray(neff_bytes)
            data[index] ^= mask
            with pytest.raises(NeffFormatError):
                Neff.from_bytes(bytes(data))


@pytest.mark.parametrize("version", [0, 2, 7])
def test_unsupported_version(tmp_path, neff_bytes, reseal, version):
    data = reseal(neff_bytes[:8] + struct.pack("<I", version) + neff_bytes[12:])
    with pytest.raises(NeffFormatError) as err:
        _load_file(tmp_path, data, "future.neff")
    message = str(err.value)
    assert "future.neff" in message
    assert f"version {version} is not supported" in message
    assert "reads version 1" in message


def test_header_version_disagreeing_with_preamble(forge):
    with pytest.raises(NeffFormatError, match="header version 2 disagrees"):
        Neff.from_bytes(forge(header_extra={"version": 2}))


def test_header_naming_another_format(forge):
    with pytest.raises(NeffFormatError, match="header names format 'something-else'"):
        Neff.from_bytes(forge(header_extra={"format": "something-else"}))


def test_invalid_header_json(reseal):
    header = b"{not json"
    data = NEFF_MAGIC + struct.pack("<II", 1, len(header)) + header + bytes(CHECKSUM_SIZE)
    with pytest.raises(NeffFormatError, match="header is not valid UTF-8 JSON"):
        Neff.from_bytes(reseal(data), source="h.neff")


def test_header_that_is_not_an_object(reseal):
    header = b"[1, 2]"
    data = NEFF_MAGIC + struct.pack("<II", 1, len(header)) + header + bytes(CHECKSUM_SIZE)
    with pytest.raises(NeffFormatError, match="header must be a JSON object, got list"):
        Neff.from_bytes(reseal(data))


def test_invalid_section_json(forge):
    with pytest.raises(NeffFormatError, match="section 'timing_summary' is not valid JSON"):
        Neff.from_bytes(forge(sections={"timing_summary": b"{oops"}), source="j.neff")


def test_section_of_the_wrong_type(forge):
    with pytest.raises(NeffFormatError, match="section 'metadata' must hold a JSON dict, got list"):
        Neff.from_bytes(forge(sections={"metadata": b"[1]"}))


def test_section_that_is_not_zlib(neff_bytes, reseal):
    header, _ = unpack(neff_bytes, "x")
    entry = header["sections"][0]
    start = PREAMBLE_SIZE + struct.unpack_from("<I", neff_bytes, 12)[0] + entry["offset"]
    data = bytearray(neff_bytes)
    data[start : start + entry["length"]] = b"\xff" * entry["length"]
    with pytest.raises(NeffFormatError, match="section 'program' is not valid zlib data"):
        Neff.from_bytes(reseal(bytes(data)))


def test_section_larger_than_declared_is_refused(neff_bytes, reseal):
    # A "zip bomb" must not be inflated past the size the header declares.
    header_length = struct.unpack_from("<I", neff_bytes, 12)[0]
    header = json.loads(neff_bytes[PREAMBLE_SIZE : PREAMBLE_SIZE + header_length])
    header["sections"][0]["raw_length"] = 10
    new_header = json.dumps(header).encode()
    rest = neff_bytes[PREAMBLE_SIZE + header_length :]
    data = neff_bytes[:12] + struct.pack("<I", len(new_header)) + new_header + rest
    with pytest.raises(NeffFormatError, match="section 'program' does not decompress to its declared 10 bytes"):
        Neff.from_bytes(reseal(data))


def _reseal_with_header(neff_bytes: bytes, reseal, edit) -> bytes:
    """Rewrite the header JSON through ``edit``, keep the payloads, and fix the checksum."""
    header_length = struct.unpack_from("<I", neff_bytes, 12)[0]
    header = json.loads(neff_bytes[PREAMBLE_SIZE : PREAMBLE_SIZE + header_length])
    edit(header)
    new_header = json.dumps(header).encode()
    return reseal(NEFF_MAGIC + struct.pack("<II", 1, len(new_header)) + new_header + neff_bytes[PREAMBLE_SIZE + header_length :])


@pytest.mark.parametrize("field", ["offset", "length", "raw_length"])
@pytest.mark.parametrize("value", [-1, 10**30, "12", 1.5, True, None])
def test_malformed_section_table(neff_bytes, reseal, field, value):
    data = _reseal_with_header(neff_bytes, reseal, lambda h: h["sections"][0].__setitem__(field, value))
    with pytest.raises(NeffFormatError, match="malformed section table entry"):
        Neff.from_bytes(data)


def test_duplicate_section(neff_bytes, reseal):
    data = _reseal_with_header(neff_bytes, reseal, lambda h: h["sections"].append(dict(h["sections"][0])))
    with pytest.raises(NeffFormatError, match="section 'program' appears twice"):
        Neff.from_bytes(data)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(["format", "version", "tensors", "sections", "program"]),
    field=st.sampled_from([None, "name", "offset", "length", "raw_length", "encoding"]),
    value=_json,
)
def test_sealed_but_nonsensical_headers_raise_format_errors(key, field, value):
    def edit(header):
        if field is None:
            header[key] = value
        else:
            header["sections"][-1][field] = value

    data = _reseal_with_header(_SMALL_NEFF, _reseal, edit)
    try:
        Neff.from_bytes(data)
    except NeffFormatError:
        pass


def test_missing_program_section(forge):
    with pytest.raises(NeffFormatError, match="has no 'program' section"):
        Neff.from_bytes(forge(drop=["program"]), source="m.neff")


def test_unknown_opcode(forge, neff):
    program = neff.program.to_dict()
    program["instructions"][3] = {"op": "FROBNICATE", "engine": "vector"}
    with pytest.raises(NeffFormatError) as err:
        Neff.from_bytes(forge(program), source="op.neff")
    message = str(err.value)
    assert message.startswith("op.neff: the program section is invalid (instruction 3:")
    assert "unknown opcode 'FROBNICATE'" in message


def test_instruction_with_missing_operand(forge, neff):
    program = neff.program.to_dict()
    del program["instructions"][0]["src"]
    with pytest.raises(NeffFormatError, match=r"instruction 0: .*TypeError"):
        Neff.from_bytes(forge(program))


def test_instruction_with_malformed_access_pattern(forge, neff):
    program = neff.program.to_dict()
    program["instructions"][1]["dst"] = {"ap": {"m": "sbuf"}}
    with pytest.raises(NeffFormatError, match=r"instruction 1: .*KeyError"):
        Neff.from_bytes(forge(program))


def test_program_missing_its_tensor_table(forge, neff):
    program = neff.program.to_dict()
    del program["tensors"]
    with pytest.raises(NeffFormatError, match="program section is invalid: KeyError: 'tensors'"):
        Neff.from_bytes(forge(program))


def test_header_tensor_table_must_match_the_program(forge):
    tensors = [{"name": "x", "shape": [1], "dtype": "float32", "kind": "input"}]
    with pytest.raises(NeffFormatError, match="tensor table disagrees"):
        Neff.from_bytes(forge(header_extra={"tensors": tensors}))


def test_unknown_section_encoding(neff_bytes, reseal):
    data = neff_bytes.replace(b'"encoding":"json+zlib"', b'"encoding":"json+lzma"', 1)
    with pytest.raises(NeffFormatError, match="unknown encoding 'json\\+lzma'"):
        Neff.from_bytes(reseal(data))


def test_compressed_payload_is_really_zlib(neff_bytes):
    _, sections = unpack(neff_bytes, "x")
    assert json.loads(zlib.decompress(sections["program"]))["name"] == "matmul_256x256x512_bfloat16"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_escape_as_other_errors(data):
    with pytest.raises(NeffFormatError):
        Neff.from_bytes(NEFF_MAGIC + struct.pack("<I", 1) + data)


# ``forge`` and ``neff`` are stateless (every call builds fresh dicts), so sharing them is safe.
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(instruction=st.dictionaries(st.sampled_from(["op", "dst", "src", "engine", "queue", "x"]), _json, max_size=5))
def test_sealed_but_nonsensical_programs_raise_format_errors(forge, neff, instruction):
    program = neff.program.to_dict()
    if "op" in instruction and isinstance(instruction["op"], str):
        instruction["op"] = "DMA_COPY"
    program["instructions"] = [instruction]
    try:
        Neff.from_bytes(forge(program))
    except NeffFormatError:
        pass
