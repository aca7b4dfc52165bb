"""The NEFF: a compiled program packaged as a versioned, self-describing file.

Sections (each zlib-compressed JSON, see ``container`` for the byte layout):

* ``program``        - ``Program.to_dict()`` without the graph: tensor table, instructions with
                       their source locations, target, program metadata. Always present.
* ``graph``          - the graph-level form for the fast executor, when the program has one.
* ``timing_summary`` - the timing model's summary, computed once per NEFF and reused per launch.
* ``metadata``       - what the NEFF was built from (compiler options, source hash, ...).

The header repeats the tensor table so tools can show a NEFF's interface without decoding its
program, and holds ``compiled_for``, the request a NEFF cache stored it for (``NeffCache`` checks
it before decompressing anything). Loading checks format, version and checksum, and turns every fault into a
``NeffFormatError`` naming the file: a bad NEFF must never surface as a KeyError deep in a launch.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass, field
from typing import Any

from ..errors import NeffFormatError
from ..isa import Instruction
from ..program import Program, TensorDecl
from .atomic import atomic_write_bytes
from .container import (
    FORMAT_NAME,
    NEFF_MAGIC,
    NEFF_VERSION,
    PREAMBLE_SIZE,
    check_preamble,
    decode_section,
    encode_section,
    pack,
    unpack,
)

__all__ = ["NEFF_MAGIC", "NEFF_VERSION", "Neff", "decode_neff", "decode_sections", "read_neff_file"]


@dataclass
class Neff:
    """A loaded or to-be-written NEFF. Treat instances as immutable once cached or saved."""

    program: Program
    timing_summary: dict | None = None
    metadata: dict = field(default_factory=dict)
    # The request this NEFF was compiled for, as a NeffCache records it (the canonical JSON text
    # of its cache key's parts); None for a NEFF that never went through a cache.
    compiled_for: str | None = None

    # --- writing ---------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The file contents. Deterministic (no timestamps) so identical builds give identical
        bytes, whichever process or cache writer produced them."""
        program = self.program.to_dict()
        graph = program.pop("graph", None)
        sections = {"program": encode_section(program, "program")}
        if graph is not None:
            sections["graph"] = encode_section(graph, "graph")
        if self.timing_summary is not None:
            sections["timing_summary"] = encode_section(self.timing_summary, "timing_summary")
        sections["metadata"] = encode_section(self.metadata, "metadata")
        return pack(_header(self.program, self.compiled_for), sections)

    def save(self, path: str | os.PathLike) -> None:
        """Write atomically: a crash or concurrent writer never leaves a half-written NEFF."""
        atomic_write_bytes(path, self.to_bytes())

    # --- reading ---------------------------------------------------------------------------
    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, source: str = "<bytes>") -> Neff:
        """Decode a NEFF; ``source`` names it in error messages (usually the file path)."""
        return decode_neff(data, source)[1]

    @classmethod
    def load(cls, path: str | os.PathLike) -> Neff:
        """Read a NEFF file. OSErrors (missing file, permissions) propagate unchanged; anything
        wrong with the contents raises NeffFormatError."""
        return cls.from_bytes(read_neff_file(path), source=os.fspath(path))


def decode_neff(data: bytes | bytearray | memoryview, source: str = "<bytes>") -> tuple[dict, Neff]:
    """The verified header and the decoded NEFF, for callers that want both (``inspect``)."""
    header, sections = unpack(data, source)
    return header, decode_sections(header, sections, source)


def decode_sections(header: dict, sections: dict, source: str) -> Neff:
    """The NEFF of a verified header and its section payloads (``container.unpack``)."""
    compiled_for = header.get("compiled_for")
    if compiled_for is not None and not isinstance(compiled_for, str):
        raise NeffFormatError(f"{source}: the header's compiled_for must be a string, got {type(compiled_for).__name__}")
    program_dict = decode_section(header, sections, "program", source)
    _require_type(program_dict, dict, "program", source)
    graph = _optional_section(header, sections, "graph", dict, source)
    timing = _optional_section(header, sections, "timing_summary", dict, source)
    metadata = _optional_section(header, sections, "metadata", dict, source) or {}
    program = _program_from_dict({**program_dict, "graph": graph}, source)
    _check_tensor_table(header, program, source)
    return Neff(program=program, timing_summary=timing, metadata=metadata, compiled_for=compiled_for)


def read_neff_file(path: str | os.PathLike) -> bytes:
    """The bytes of a NEFF file, refusing a foreign file after its first 16 bytes rather than
    reading all of a (possibly huge) file that is not a NEFF."""
    with open(path, "rb") as f:
        head = f.read(PREAMBLE_SIZE)
        check_preamble(head, os.fspath(path))
        return head + f.read()


def _header(program: Program, compiled_for: str | None) -> dict:
    header = {
        "format": FORMAT_NAME,
        "version": NEFF_VERSION,
        "producer": f"neuron-sim {_package_version()}",
        "program": program.name,
        "target": program.target,
        "created_by": _environment(),
        "tensors": [t.to_dict() for t in program.tensors],
    }
    if compiled_for is not None:
        header["compiled_for"] = compiled_for
    return header


def _package_version() -> str:
    # Looked up at call time: neuron_sim/__init__ may import this module before defining it.
    package = sys.modules.get(__name__.split(".")[0])
    return getattr(package, "__version__", "unknown")


def _environment() -> dict:
    """Versions that affect numerics, for debugging a NEFF that behaves differently elsewhere."""
    import ml_dtypes
    import numpy

    return {
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "ml_dtypes": getattr(ml_dtypes, "__version__", "unknown"),
        "platform": sys.platform,
    }


def _optional_section(header: dict, sections: dict, name: str, kind: type, source: str) -> Any:
    if name not in sections:
        return None
    value = decode_section(header, sections, name, source)
    if value is not None:
        _require_type(value, kind, name, source)
    return value


def _require_type(value: Any, kind: type, name: str, source: str) -> None:
    if not isinstance(value, kind):
        raise NeffFormatError(f"{source}: section {name!r} must hold a JSON {kind.__name__}, got {type(value).__name__}")


def _program_from_dict(d: dict, source: str) -> Program:
    """Program.from_dict raises whatever its input provokes (KeyError, TypeError, ValidationError,
    ...); any of them here means the file holds something this simulator cannot run."""
    try:
        return Program.from_dict(d)
    except Exception as err:  # any failure here means a bad file; the cause stays chained
        where = _failing_instruction(d)
        raise NeffFormatError(f"{source}: the program section is invalid{where}: {type(err).__name__}: {err}") from err


def _failing_instruction(d: dict) -> str:
    """Point at the first instruction that does not decode, if the failure is in one."""
    instructions = d.get("instructions")
    if not isinstance(instructions, list):
        return ""
    for index, inst in enumerate(instructions):
        try:
            Instruction.from_dict(inst)
        except Exception:  # noqa: BLE001 - only locating the culprit
            return f" (instruction {index}: {str(inst)[:200]})"
    return ""


def _check_tensor_table(header: dict, program: Program, source: str) -> None:
    try:
        declared = [TensorDecl.from_dict(t) for t in header.get("tensors", [])]
    except Exception as err:  # whatever the malformed table provokes; the cause stays chained
        raise NeffFormatError(f"{source}: the header's tensor table is invalid: {type(err).__name__}: {err}") from err
    if declared != program.tensors:
        raise NeffFormatError(f"{source}: the header's tensor table disagrees with the program's tensor table")
