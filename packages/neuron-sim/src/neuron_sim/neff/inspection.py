"""``inspect``: what a NEFF holds, as a plain dict for CLIs, logs and bug reports."""

from __future__ import annotations

import hashlib
import os
from collections import Counter

from ..isa import DmaInstruction
from .format import decode_neff, read_neff_file


def inspect(neff: str | os.PathLike | bytes | bytearray | memoryview) -> dict:
    """The header of a NEFF (path or bytes) plus instruction counts per engine.

    DMA instructions count under ``"dma"`` rather than under the engine that triggers them: they
    occupy DMA queues, not the trigger engine, which is what someone reading the counts wants.
    Raises NeffFormatError for anything that is not an intact NEFF.
    """
    if isinstance(neff, (bytes, bytearray, memoryview)):
        data, source = bytes(neff), "<bytes>"
    else:
        data, source = read_neff_file(neff), os.fspath(neff)
    header, decoded = decode_neff(data, source)
    instructions = decoded.program.instructions
    counts = Counter("dma" if isinstance(inst, DmaInstruction) else inst.engine for inst in instructions)
    return {
        **header,
        "instruction_counts": dict(sorted(counts.items())),
        "num_instructions": len(instructions),
        "file_size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
