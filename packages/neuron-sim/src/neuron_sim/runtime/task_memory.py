"""The device memory a task reads and writes, and what its failure does to that memory.

A launch reads its input and inout tensors and writes its outputs (and inouts); a host task reads
and writes what ``Queue.submit`` was told (``reads=``, ``writes=``: numpy views of device memory
or HbmAllocations); memory that is not device memory (plain host arrays) is not tracked. See
``neuron_sim.memory.validity`` for what marking memory invalid means.
"""

from __future__ import annotations

import numpy as np

from ..memory import HbmAllocation
from ..memory.hbm import locate


def _launch_memory(task, kinds: tuple[str, ...]):
    """(buffer, declared nbytes) of a launch's tensors of the given kinds."""
    buffers = task.buffers or {}
    seen = set()
    for program in task.programs:
        for decl in program.tensors:
            if decl.kind in kinds and decl.name not in seen and decl.name in buffers:
                seen.add(decl.name)
                yield buffers[decl.name], decl.nbytes


def reads(task):
    """(memory, nbytes or None for all of it) of what ``task`` reads."""
    if task.programs:
        return _launch_memory(task, ("input", "inout"))
    return ((m, None) for m in task.reads)


def writes(task):
    if task.programs:
        return _launch_memory(task, ("output", "inout"))
    return ((m, None) for m in task.writes)


def _span(memory, nbytes):
    """(hbm, block, lo, hi, contiguous) of device memory, or None if it is not device memory."""
    if isinstance(memory, HbmAllocation):
        found = locate(memory.array)
        if found is None:
            return None
        hbm, block, lo, hi = found
        return hbm, block, lo, lo + (memory.nbytes if nbytes is None else min(nbytes, memory.nbytes)), True
    found = locate(memory)
    if found is None:
        return None
    hbm, block, lo, hi = found
    if nbytes is not None:
        hi = min(hi, lo + nbytes)
    return hbm, block, lo, hi, memory.flags.c_contiguous or memory.ndim <= 1 and memory.strides == (memory.itemsize,)


def first_invalid_read(task):
    """``(cause, hbm, lo, hi)`` of the first invalid range ``task`` reads, or None."""
    for memory, nbytes in reads(task):
        span = _span(memory, nbytes)
        if span is None:
            continue
        hbm, block, lo, hi, _ = span
        found = hbm.invalid.find(block.address, lo, hi)
        if found is not None:
            cause, r_lo, r_hi = found
            return cause, hbm, max(lo, r_lo), min(hi, r_hi)
    return None


def mark_not_written(task, cause) -> None:
    """``task`` did not write what it should have: those bytes are invalid because of ``cause``."""
    for memory, nbytes in writes(task):
        span = _span(memory, nbytes)
        if span is not None:
            hbm, block, lo, hi, _ = span
            hbm.invalid.mark_invalid(block.address, lo, hi, cause)


def mark_written(task) -> None:
    """``task`` wrote its memory: contiguous written ranges are valid again (a strided write
    leaves the bytes between its elements as they were)."""
    for memory, nbytes in writes(task):
        span = _span(memory, nbytes)
        if span is not None and span[4]:
            hbm, block, lo, hi, _ = span
            hbm.invalid.mark_valid(block.address, lo, hi)


def check_declared(memory, what: str) -> tuple:
    """``memory`` (an iterable of numpy arrays or HbmAllocations) as a tuple, checked."""
    items = tuple(memory)
    for item in items:
        if not isinstance(item, (np.ndarray, HbmAllocation)):
            raise TypeError(f"submit({what}=...) takes numpy views of device memory or HbmAllocations, got {type(item).__name__}")
    return items
