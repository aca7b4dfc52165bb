"""A uint8 index tensor is a boolean mask, as on CPU, in eager, adaptive and compiled mode.

CPU's advanced indexing reads a uint8 index as a mask (with a deprecation warning); the compiled
path gathered it as integer positions (``x[uint8([1, 0, 1])] = v`` wrote rows 1, 0, 1), silently
wrong. Shaped as PyTorch's test_byte_tensor_assignment / test_byte_mask_accumulate, plus odd shapes:
a size-1 dim, a dim of 130 (not a multiple of 128), non-contiguous operands."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch_neuronx  # noqa: F401 - the neuron device
from tnx_helpers import execution_mode

N = "neuron"


def _assign(x, mask, value):
    x = x.clone()
    x[mask] = value
    return x


def _accumulate(x, mask, value):
    return x.index_put((mask,), value, accumulate=True)


def _index_put_(x, mask, value):
    x = x.clone()
    x.index_put_((mask,), value)
    return x


# (name, fn, x, mask values along x's dim 0, value): CPU tensors.
CASES = [
    ("assign_rows", _assign, torch.arange(0., 16).view(4, 4), [1, 0, 1, 0], torch.tensor([3., 4., 5., 6.])),
    ("accumulate_rows", _accumulate, torch.zeros(4, 130), [1, 0, 2, 0], torch.ones(130)),
    ("assign_size_1_rows", _assign, torch.arange(3.).view(3, 1), [0, 1, 1], torch.tensor([[7.], [8.]])),
    ("index_put_non_contiguous", _index_put_, torch.arange(20.).view(4, 5).t(), [0, 1, 0, 0, 1], torch.tensor([-1., -2., -3., -4.])),
    ("accumulate_2d_mask", lambda x, m, v: x.index_put((m.view(2, 3),), v, accumulate=True),
     torch.zeros(2, 3), [1, 0, 1, 1, 0, 0], torch.tensor(2.)),
]
IDS = [name for name, *_ in CASES]


def _cpu(fn, x, mask, value):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = fn(x, torch.tensor(mask, dtype=torch.uint8), value)
    assert any("uint8" in str(w.message) for w in caught)  # CPU's deprecation: it reads a mask
    return expected


@pytest.mark.parametrize("mode", ["eager", "adaptive"])
@pytest.mark.parametrize("name, fn, x, mask, value", CASES, ids=IDS)
def test_a_uint8_index_is_a_mask_in_eager_mode(name, fn, x, mask, value, mode):
    expected = _cpu(fn, x, mask, value)
    with execution_mode(mode), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = fn(x.to(N), torch.tensor(mask, dtype=torch.uint8, device=N), value.to(N)).cpu()
    assert got.shape == expected.shape and torch.equal(got, expected)
    if mode == "eager":
        # CPU's deprecation warning, as CPU gives it. Adaptive eager may run the CPU kernel at a
        # flush on its worker thread, where PyTorch prints its C++ warning on stderr instead of
        # raising a Python warning at the call (an open gap: the warning is not lost, but it is
        # not catchable there).
        assert any("uint8" in str(w.message) for w in caught)


@pytest.mark.parametrize("name, fn, x, mask, value", CASES, ids=IDS)
def test_a_uint8_index_is_a_mask_in_compiled_graphs(name, fn, x, mask, value):
    """Compiled, a uint8 mask takes the path a bool mask takes: CPU's values, or the error the bool
    mask gives (its nonzero count decides the shape) - never integer positions' values."""
    expected = _cpu(fn, x, mask, value)
    results = {}
    for dtype in (torch.uint8, torch.bool):
        with execution_mode("compile"):
            try:
                results[dtype] = torch.compile(fn, backend="neuron")(
                    x.to(N), torch.tensor(mask, dtype=dtype, device=N), value.to(N)).cpu()
            except Exception as err:  # noqa: BLE001 - compared with the bool mask's outcome below
                results[dtype] = type(err)
    as_uint8, as_bool = results[torch.uint8], results[torch.bool]
    if isinstance(as_uint8, torch.Tensor):
        assert as_uint8.shape == expected.shape and torch.equal(as_uint8, expected)
    else:
        assert as_uint8 is as_bool, (as_uint8, as_bool)


def test_a_uint8_index_read_is_a_mask():
    """``x[uint8_mask]`` (aten::index) selects the rows, as CPU's ``x[mask.bool()]``."""
    x = torch.arange(0., 12).view(3, 4)[:, 1:]  # non-contiguous
    mask = torch.tensor([1, 0, 1], dtype=torch.uint8)
    expected = x[mask.bool()]
    got = torch.ops.aten.index.Tensor(x.to(N), [mask.to(N)]).cpu()
    assert got.shape == expected.shape and torch.equal(got, expected)
