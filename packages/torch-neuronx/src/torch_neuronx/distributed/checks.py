"""Cross-rank agreement of a collective's shapes and dtypes, checked before its bytes move.

Gloo does not check: an all_reduce of 4 elements on one rank and 6 on another left garbage on
one and aborted the other process (``gloo::EnforceNotMet``, "terminate called"). So before a
collective whose tensors must match, every rank shares a small signature (collective, dtype,
shapes) over the same gloo group; any difference is a ValueError on every rank naming both
ranks' tensors. ``TORCH_NEURONX_DIST_CHECK=0`` skips it (one small all-gather per collective).

The signature also carries the rank's arrival: the simulated time its stream reached the
collective. Every rank starts the collective at the latest arrival, as a collective waits for
its slowest rank on hardware.
"""

from __future__ import annotations

import zlib

import torch

from ..device import env

CHECK_ENV = "TORCH_NEURONX_DIST_CHECK"

_DTYPES = [getattr(torch, n) for n in (
    "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool", "complex64",
    "complex128", "float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64",
) if hasattr(torch, n)]
_DTYPE_ID = {d: i for i, d in enumerate(_DTYPES)}
_SHOWN_DIMS = 4  # dims of the first tensor carried for the message; the hash covers all of them
_FIELDS = 6 + _SHOWN_DIMS  # collective, dtype, tensor count, ndim, dims..., hash of every shape, arrival
_ARRIVAL = _FIELDS - 1  # float64 bits of the arrival time (ns); not compared


def enabled() -> bool:
    return env.get(CHECK_ENV, "1") not in ("0", "")


def _signature(name: str, tensors: list[torch.Tensor], arrival_ns: float) -> torch.Tensor:
    first = tensors[0] if tensors else None
    shapes = ";".join(f"{_DTYPE_ID.get(t.dtype, -1)}:{list(t.shape)}" for t in tensors)
    dims = list(first.shape)[:_SHOWN_DIMS] if first is not None else []
    row = [zlib.crc32(name.encode()), _DTYPE_ID.get(first.dtype, -1) if first is not None else -1, len(tensors),
           first.dim() if first is not None else 0, *dims, *([-1] * (_SHOWN_DIMS - len(dims))), zlib.crc32(shapes.encode()),
           torch.tensor([arrival_ns], dtype=torch.float64).view(torch.int64).item()]
    return torch.tensor(row, dtype=torch.int64)


def _describe(row: list[int]) -> str:
    dtype = _DTYPES[row[1]] if 0 <= row[1] < len(_DTYPES) else "?"
    ndim = row[3]
    dims = [d for d in row[4:4 + min(ndim, _SHOWN_DIMS)]]
    shape = str(dims) if ndim <= _SHOWN_DIMS else str(dims)[:-1] + ", ...]"
    extra = f" (and {row[2] - 1} more tensor(s))" if row[2] > 1 else ""
    return f"{str(dtype).replace('torch.', '')} {shape}{extra}"


def check_agreement(gloo, name: str, tensors: list[torch.Tensor], arrival_ns: float = 0.0) -> float:
    """Raise a ValueError on every rank unless all ranks of ``gloo`` call collective ``name``
    with tensors of the same dtypes and shapes as ``tensors``. Returns the latest rank's
    ``arrival_ns`` (simulated ns)."""
    mine = _signature(name, tensors, arrival_ns)
    rows = torch.empty(gloo.size() * _FIELDS, dtype=torch.int64)
    try:
        gloo._allgather_base(rows, mine).wait()
    except RuntimeError as err:
        raise RuntimeError(f"neuron process group: {name} on rank {gloo.rank()} of {gloo.size()} failed while the "
                           f"ranks compared shapes: {err}") from err
    table = rows.view(gloo.size(), _FIELDS)
    latest = table[:, _ARRIVAL].contiguous().view(torch.float64).max().item()
    rows = table[:, :_ARRIVAL].tolist()
    here = rows[gloo.rank()]
    for rank, row in enumerate(rows):
        if row[0] != here[0]:
            raise ValueError(f"neuron process group: every rank must call the same collective in the same order; rank "
                             f"{gloo.rank()} called {name} while rank {rank} called another collective")
        if row != here:
            raise ValueError(f"neuron process group: {name} needs the same dtype and shape on every rank; rank "
                             f"{gloo.rank()} has {_describe(here)}, rank {rank} has {_describe(row)}")
    return latest
