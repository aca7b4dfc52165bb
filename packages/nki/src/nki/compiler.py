"""``nki.compiler`` (``ncc``): direct allocation of on-chip tensors and the compiler's kernel decorators.

``nl.ndarray(shape, dtype, buffer=ncc.sbuf.mod_alloc(base_addr=..., num_free_tiles=(2,)))`` places
each logical tile of a tensor at the physical address the allocation gives (NKI direct allocation
guide): logical blocks that map to one physical tile share its bytes, as on the chip, so a kernel
that reads a logical tile after another one overwrote its physical tile reads the newer data. A
tensor without block dims is one tile at the address. ``nl.sbuf`` / ``ncc.sbuf.auto_alloc()``
allocate automatically. ``force_auto_alloc`` makes a kernel's direct allocations automatic.

``skip_middle_end_transformations`` and ``enable_stack_allocator`` steer passes of the Neuron
compiler that this simulator does not have (its instructions run as traced): they return the
kernel unchanged.
"""

from __future__ import annotations

from types import SimpleNamespace

from . import tracing
from .language.loops import no_reorder
from .storage import Allocation, force_auto


def _linear(indices, tiles, scale: int, base: int) -> int:
    """``base + scale * (row-major index of indices modulo tiles)`` (tiles () = one tile)."""
    tiles = tuple(tiles) or (1,) * len(indices)
    if len(tiles) != len(indices):
        raise ValueError(f"the allocation gives {len(tiles)} tile counts for {len(indices)} block dims")
    index = 0
    for i, n in zip(indices, tiles):
        index = index * n + i % n
    return base + index * scale


def _sbuf_alloc(func) -> Allocation:
    return Allocation("sbuf", lambda idx, pdim, fdim: tuple(func(idx, pdim, fdim)), f"ncc.sbuf.alloc({func!r})")


def _sbuf_mod_alloc(*, base_addr: int, base_partition: int = 0, num_par_tiles=(), num_free_tiles=()) -> Allocation:
    def place(idx, pdim, fdim):
        return (_linear(idx, num_par_tiles, pdim, base_partition), _linear(idx, num_free_tiles, fdim, base_addr))

    return Allocation("sbuf", place, f"ncc.sbuf.mod_alloc(base_addr={base_addr}, num_free_tiles={tuple(num_free_tiles)})")


def _psum_address(bank: int, partition: int, byte_addr: int) -> tuple[int, int]:
    return partition, bank * tracing.current().arch.psum_bank_bytes + byte_addr


def _psum_alloc(func) -> Allocation:
    return Allocation("psum", lambda idx, pdim, fdim: _psum_address(*func(idx, pdim, fdim)), f"ncc.psum.alloc({func!r})")


def _psum_mod_alloc(*, base_bank: int, base_addr: int = 0, base_partition: int = 0, num_bank_tiles=(),
                    num_par_tiles=(), num_free_tiles=()) -> Allocation:
    def place(idx, pdim, fdim):
        return _psum_address(_linear(idx, num_bank_tiles, 1, base_bank), _linear(idx, num_par_tiles, pdim, base_partition),
                             _linear(idx, num_free_tiles, fdim, base_addr))

    return Allocation("psum", place, f"ncc.psum.mod_alloc(base_bank={base_bank}, num_bank_tiles={tuple(num_bank_tiles)})")


sbuf = SimpleNamespace(alloc=_sbuf_alloc, mod_alloc=_sbuf_mod_alloc, auto_alloc=lambda: "sbuf")
psum = SimpleNamespace(alloc=_psum_alloc, mod_alloc=_psum_mod_alloc, auto_alloc=lambda: "psum")


def _decorator(mark=None):
    """A decorator usable bare (``@d``) or called (``@d()``, ``@d(log_level=...)``)."""

    def decorator(func=None, **_options):
        def apply(f):
            if mark is not None:
                mark(f)
            return f

        return apply(func) if func is not None else apply

    return decorator


skip_middle_end_transformations = _decorator()
enable_stack_allocator = _decorator()
force_auto_alloc = _decorator(force_auto)


__all__ = ["sbuf", "psum", "Allocation", "skip_middle_end_transformations", "enable_stack_allocator",
           "force_auto_alloc", "no_reorder"]
