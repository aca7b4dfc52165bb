"""The NEFF byte layout: a sealed container of named, compressed JSON sections.

    magic (8 bytes) | version (u32 LE) | header length (u32 LE) | header (UTF-8 JSON)
    | section payloads (zlib-compressed JSON, back to back) | SHA-256 of everything before it

This module knows nothing about programs: it packs and unpacks sections and refuses, with a
``NeffFormatError`` naming the file and the fault, anything that is not an intact file of the
supported version. JSON keeps the file self-describing and safe to load from anywhere (no pickle:
loading a NEFF must never run code). The checksum is over the whole file so a flipped bit anywhere
is caught before any payload is trusted.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from typing import Any

from ..errors import NeffFormatError

NEFF_MAGIC = b"NEFFSIM\x00"
# The major version of the layout. Readers refuse other versions instead of guessing: a NEFF is a
# cache artifact, so recompiling is always possible and always safer than misreading one.
NEFF_VERSION = 1
FORMAT_NAME = "neuron-sim-neff"
ENCODING = "json+zlib"

_PREAMBLE = struct.Struct("<8sII")  # magic, version, header length
PREAMBLE_SIZE = _PREAMBLE.size
CHECKSUM_SIZE = hashlib.sha256().digest_size
_MAX_SIZE = 1 << 48

# First bytes of files people are likely to hand us by mistake, to say what was found instead.
_FOREIGN_SIGNATURES = (
    (b"\x89PNG", "a PNG image"),
    (b"\x7fELF", "an ELF binary"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x1f\x8b", "gzip data (a real Neuron SDK NEFF or a tarball?)"),
    (b"\x93NUMPY", "a NumPy .npy file"),
    (b"\x80", "a Python pickle"),
    (b"{", "JSON text"),
)


def encode_section(value: Any, name: str) -> bytes:
    """Serialize one section; raises TypeError naming the section if it is not JSON-able."""
    try:
        text = json.dumps(value, separators=(",", ":"), default=_json_default)
    except (TypeError, ValueError) as err:
        raise TypeError(f"NEFF section {name!r} is not JSON-serializable: {err}") from None
    return text.encode("utf-8")


def _json_default(value: Any) -> Any:
    # NumPy scalars show up in metadata and timing dicts; store them as plain numbers.
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():
        return item()
    raise TypeError(f"{type(value).__name__} {value!r} cannot be stored in a NEFF")


def pack(header: dict, sections: dict[str, bytes]) -> bytes:
    """Seal ``sections`` (name -> uncompressed JSON bytes) behind ``header`` and a checksum.

    Section offsets are relative to the first byte after the header, so the header can describe
    them without depending on its own length.
    """
    entries, payloads, offset = [], [], 0
    for name, raw in sections.items():
        payload = zlib.compress(raw, 6)
        entries.append({"name": name, "offset": offset, "length": len(payload), "raw_length": len(raw), "encoding": ENCODING})
        payloads.append(payload)
        offset += len(payload)
    header_bytes = json.dumps({**header, "sections": entries}, separators=(",", ":")).encode("utf-8")
    body = _PREAMBLE.pack(NEFF_MAGIC, NEFF_VERSION, len(header_bytes)) + header_bytes + b"".join(payloads)
    return body + hashlib.sha256(body).digest()


def check_preamble(head: bytes, source: str) -> int:
    """Check the magic and version in the first ``PREAMBLE_SIZE`` bytes; return the header length.

    Separate so ``Neff.load`` can reject a foreign multi-gigabyte file after reading 16 bytes.
    """
    if not head:
        raise NeffFormatError(f"{source}: the file is empty, not a NEFF")
    if not head.startswith(NEFF_MAGIC[: len(head)]):
        raise NeffFormatError(f"{source}: not a NEFF file: {_describe_foreign(head)}; a NEFF starts with {NEFF_MAGIC!r}")
    if len(head) < PREAMBLE_SIZE:
        raise NeffFormatError(f"{source}: truncated NEFF: {len(head)} bytes, shorter than the {PREAMBLE_SIZE}-byte preamble")
    _, version, header_length = _PREAMBLE.unpack_from(head)
    if version != NEFF_VERSION:
        raise NeffFormatError(
            f"{source}: NEFF format version {version} is not supported; this neuron-sim reads version "
            f"{NEFF_VERSION} only. Recompile the program to regenerate it."
        )
    return header_length


def unpack(data: bytes | bytearray | memoryview, source: str) -> tuple[dict, dict[str, memoryview]]:
    """Verify ``data`` and return its header and raw (still compressed) section payloads, as
    views into ``data`` (no copies: an entry may be large)."""
    view = memoryview(data).cast("B")
    header_length = check_preamble(bytes(view[:PREAMBLE_SIZE]), source)
    if len(view) < PREAMBLE_SIZE + header_length + CHECKSUM_SIZE:
        raise NeffFormatError(
            f"{source}: truncated NEFF: {len(view)} bytes, but its header alone declares "
            f"{PREAMBLE_SIZE + header_length + CHECKSUM_SIZE}"
        )
    if hashlib.sha256(view[:-CHECKSUM_SIZE]).digest() != bytes(view[-CHECKSUM_SIZE:]):
        raise NeffFormatError(f"{source}: {_diagnose_bad_checksum(view, header_length)}")
    header = _parse_header(bytes(view[PREAMBLE_SIZE : PREAMBLE_SIZE + header_length]), source)
    payload_area = view[PREAMBLE_SIZE + header_length : -CHECKSUM_SIZE]
    sections = {}
    for entry in header["sections"]:
        start, end = entry["offset"], entry["offset"] + entry["length"]
        if end > len(payload_area):
            raise NeffFormatError(f"{source}: section {entry['name']!r} ends at {end}, past the {len(payload_area)}-byte payload area")
        sections[entry["name"]] = payload_area[start:end]
    return header, sections


def header_of(data: bytes, source: str = "<bytes>") -> dict:
    """The header of NEFF bytes, without verifying the rest (for bytes this process just packed)."""
    header_length = check_preamble(data[:PREAMBLE_SIZE], source)
    return _parse_header(bytes(memoryview(data)[PREAMBLE_SIZE : PREAMBLE_SIZE + header_length]), source)


def decoded_size(header: dict) -> int:
    """The bytes the header says its sections decompress to: what decoding the NEFF will hold in
    memory (before parsing), checkable before anything is decompressed."""
    return sum(entry["raw_length"] for entry in header["sections"])


def decode_section(header: dict, sections: dict[str, memoryview], name: str, source: str) -> Any:
    """Decompress and parse section ``name``. Decompression is bounded by the declared size so a
    crafted file cannot exhaust memory."""
    entry = next((e for e in header["sections"] if e["name"] == name), None)
    if entry is None:
        present = [e["name"] for e in header["sections"]]
        raise NeffFormatError(f"{source}: the NEFF has no {name!r} section (it has {present})")
    if entry["encoding"] != ENCODING:
        raise NeffFormatError(f"{source}: section {name!r} has unknown encoding {entry['encoding']!r}; expected {ENCODING!r}")
    where = f"{source}: section {name!r}"
    try:
        inflater = zlib.decompressobj()
        raw = inflater.decompress(sections[name], entry["raw_length"] + 1)
        if len(raw) != entry["raw_length"] or not inflater.eof or inflater.unused_data:
            raise NeffFormatError(f"{where} does not decompress to its declared {entry['raw_length']} bytes")
        return json.loads(raw.decode("utf-8"))
    except zlib.error as err:
        raise NeffFormatError(f"{where} is not valid zlib data: {err}") from None
    except UnicodeDecodeError as err:
        raise NeffFormatError(f"{where} is not UTF-8 text: {err}") from None
    except json.JSONDecodeError as err:
        raise NeffFormatError(f"{where} is not valid JSON: {err}") from None
    except RecursionError:
        raise NeffFormatError(f"{where} is nested too deeply to parse") from None


def _parse_header(raw: bytes, source: str) -> dict:
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise NeffFormatError(f"{source}: the NEFF header is not valid UTF-8 JSON: {err}") from None
    if not isinstance(header, dict):
        raise NeffFormatError(f"{source}: the NEFF header must be a JSON object, got {type(header).__name__}")
    if header.get("format") != FORMAT_NAME:
        raise NeffFormatError(f"{source}: header names format {header.get('format')!r}, expected {FORMAT_NAME!r}")
    if header.get("version") != NEFF_VERSION:
        raise NeffFormatError(f"{source}: header version {header.get('version')!r} disagrees with the preamble's {NEFF_VERSION}")
    _check_section_table(header.get("sections"), source)
    return header


def _check_section_table(entries: Any, source: str) -> None:
    if not isinstance(entries, list):
        raise NeffFormatError(f"{source}: the header's section table must be a list, got {type(entries).__name__}")
    seen = set()
    for entry in entries:
        ok = isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("encoding"), str)
        ok = ok and all(_is_size(entry.get(k)) for k in ("offset", "length", "raw_length"))
        if not ok:
            raise NeffFormatError(f"{source}: malformed section table entry {entry!r}")
        if entry["name"] in seen:
            raise NeffFormatError(f"{source}: section {entry['name']!r} appears twice")
        seen.add(entry["name"])


def _is_size(value: Any) -> bool:
    # Bounded so a crafted size cannot overflow a C size_t in zlib; no real NEFF comes close.
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MAX_SIZE


def _diagnose_bad_checksum(data: memoryview, header_length: int) -> str:
    """Tell truncation and trailing junk apart from corruption, using the (untrusted) header."""
    try:
        header = json.loads(bytes(data[PREAMBLE_SIZE : PREAMBLE_SIZE + header_length]).decode("utf-8"))
        payload = max((e["offset"] + e["length"] for e in header["sections"]), default=0)
        expected = PREAMBLE_SIZE + header_length + int(payload) + CHECKSUM_SIZE
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError):
        # The header itself is damaged: report plain corruption.
        expected = len(data)
    if len(data) < expected:
        return f"truncated NEFF: {len(data)} bytes of the {expected} its header declares (or a corrupt header)"
    if len(data) > expected:
        return (
            f"NEFF has {len(data) - expected} unexpected bytes after its end (expected {expected} bytes, "
            f"or a corrupt header)"
        )
    return "NEFF checksum mismatch: the file is corrupt (SHA-256 of the contents does not match the stored one)"


def _describe_foreign(head: bytes) -> str:
    for signature, what in _FOREIGN_SIGNATURES:
        if head.startswith(signature):
            return f"it starts with {head[:8]!r}, which looks like {what}"
    return f"it starts with {head[:8]!r}"
