"""CPU's error for an out-of-range index, per ATen op, for the launches that find one.

The device finds a bad index only when the program runs, and the simulator reports it as
``neuron_sim.IndexOutOfBoundsError`` (an IndexError) at the next synchronization. CPU's kernels
raise their own types and words for it, which differ by op - ``gather``, ``scatter`` and
``index_add`` raise RuntimeError, ``take`` and ``x[idx] = v`` IndexError, and ``index_select`` either,
depending on the dimension. ``for_call`` gives, once per compiled signature (the cache entry
keeps it), the mapping a launch passes as ``errors=``: the sync error's ``original`` (and every
later read of what the launch left unwritten) is then the error CPU's kernel raises for that
call, chained to the simulator's. Nothing runs per call and nothing waits for the device.
"""

from __future__ import annotations

from neuron_sim import IndexOutOfBoundsError

from .schema import arguments_by_name

_BOUNDS = "index {index} is out of bounds for dimension {dim} with size {size}"


class CpuIndexError:
    """How CPU's kernel of one call words an out-of-range index: ``kind(template)``, formatted
    with the bad index the device found and the call's dimension and size."""

    __slots__ = ("kind", "template", "dim", "size", "wraps_negative")

    def __init__(self, kind: type[Exception], template: str, dim: int, size: int, wraps_negative: bool = False):
        self.kind = kind
        self.template = template
        self.dim = dim
        self.size = size
        # Negative indices were wrapped by the size (advanced indexing): a negative one the device
        # found is the call's index plus the size.
        self.wraps_negative = wraps_negative

    def __call__(self, err: BaseException) -> Exception | None:
        if not isinstance(err, IndexOutOfBoundsError):
            return None
        if self.claims(err) and err.index is not None:
            index = err.index - self.size if self.wraps_negative and err.index < 0 else err.index
            return self.kind(self.template.format(index=index, dim=self.dim, size=self.size))
        # The program indexed another extent (the lowering flattened the dims around the indexed
        # one): its index is not the call's, so say what the device found instead.
        return self.kind(self.template.format(index="?", dim=self.dim, size=self.size)
                         + f" (the device found index {err.index} of an extent of {err.size})")

    def claims(self, err: BaseException) -> bool:
        """Whether ``err`` is over this call's indexed extent (so its index is the call's)."""
        return isinstance(err, IndexOutOfBoundsError) and err.size == self.size


def _dim_and_size(t, dim) -> tuple[int, int]:
    if t.dim() == 0:
        return 0, 1
    d = dim % t.dim()
    return d, t.size(d)


def _along_dim(kind: type[Exception], template: str = _BOUNDS):
    def rule(values):
        return CpuIndexError(kind, template, *_dim_and_size(values["self"], values["dim"]))
    return rule


def _index_select(values):
    self = values["self"]
    dim, size = _dim_and_size(self, values["dim"])
    if self.dim() > 1 and dim == 1:  # CPU's kernel for dim 1 checks with words of its own
        return CpuIndexError(RuntimeError, "INDICES element is out of DATA bounds, id={index} axis_dim={size}", dim, size)
    return CpuIndexError(IndexError, "index out of range in self", dim, size)


def _embedding(values):
    return CpuIndexError(IndexError, "index out of range in self", 0, values["weight"].size(0))


def _take(values):
    return CpuIndexError(IndexError, "out of range: tried to access index {index} on a tensor of {size} elements.",
                         0, values["self"].numel())


def _advanced_index(values):
    """``x[idx] = v`` (index_put): CPU counts the dimension among the index tensors given."""
    self, indices = values["self"], values["indices"]
    given = [d for d, i in enumerate(indices or ()) if i is not None]
    if not given:
        return None
    return CpuIndexError(IndexError, _BOUNDS, 0, self.size(given[0]), wraps_negative=True)


_RULES = {
    "aten::gather": _along_dim(RuntimeError),
    "aten::scatter": _along_dim(RuntimeError),
    "aten::scatter_add": _along_dim(RuntimeError),
    "aten::index_add": _along_dim(RuntimeError),
    "aten::index_copy": _along_dim(IndexError, "index_copy_(): " + _BOUNDS),
    "aten::index_fill": _along_dim(IndexError),
    "aten::index_select": _index_select,
    "aten::embedding": _embedding,
    "aten::take": _take,
    "aten::index": _advanced_index,
    "aten::index_put": _advanced_index,
    "aten::_index_put_impl": _advanced_index,
}


def for_call(op, args, kwargs) -> CpuIndexError | None:
    """The ``errors=`` of a launch of ``op`` over these arguments (None: not an indexing op)."""
    rule = _RULES.get(op._schema.name.rstrip("_"))
    if rule is None:
        return None
    try:
        return rule(arguments_by_name(op, args, kwargs))
    except (KeyError, TypeError, IndexError):  # a call these words do not fit: the simulator's error stands
        return None


def of_run(mappings) -> object | None:
    """The ``errors=`` of one launch of several ops' calls (an adaptive-eager run): the first of
    their mappings that can be the error's (by the extent it indexes), else the first."""
    found = [m for m in mappings if m is not None]
    if not found:
        return None
    if len(found) == 1:
        return found[0]

    def mapping(err: BaseException):
        return next((m for m in found if m.claims(err)), found[0])(err)

    return mapping
