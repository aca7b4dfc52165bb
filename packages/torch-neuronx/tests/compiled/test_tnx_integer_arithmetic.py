"""Integer arithmetic on the device (issue 20, issue 13.1): add/sub/mul, sums and products,
max/min (whole tensor and per dim, with indices), argmax/argmin, cumsum, bitwise and/or/xor,
abs/neg/minimum/maximum/clamp of int32 and int64 tensors run on the NeuronCore - GpSimd's integer
ALU, int64 by 32-bit words - with no CPU fallback, and match CPU bit for bit past 2**24, at the
dtypes' extremes and where int32 wraps. Odd shapes, size-1 dims and non-contiguous operands."""

from __future__ import annotations

import os

import pytest
import torch
from tnx_helpers import assert_equal, run_python

torch_neuronx = pytest.importorskip("torch_neuronx")

# the issue-13 values: past fp32's 2**24, past int32, negative, int32's minimum
VALUES = {
    torch.int64: [16777217, 1099511627773, -5, -(2**31), 2**63 - 1, -(2**63), -16777217, 3, 0, -1, 2**32 + 7],
    torch.int32: [16777217, 2**31 - 1, -5, -(2**31), -16777217, 3, 0, -1, 2**30 + 1, 65537, -(2**30) - 3],
}
OPS = {
    "add": lambda x: x + x.roll(1, -1),
    "sub": lambda x: x - x.flip(-1),
    "mul": lambda x: x * x.roll(2, -1),
    "mul_scalar": lambda x: x * 3,
    "add_scalar": lambda x: x + 2**20,
    "sum": lambda x: x.sum(),
    "sum_dim": lambda x: x.sum(-1),
    "sum_keepdim": lambda x: x.sum(0, keepdim=True),
    "prod_dim": lambda x: x.prod(-1),
    "max": lambda x: x.max(),
    "min": lambda x: x.min(),
    "amax": lambda x: x.amax(-1),
    "amin_dim0": lambda x: x.amin(0),
    "max_dim_values": lambda x: x.max(-1).values,
    "max_dim_indices": lambda x: x.max(-1).indices,
    "min_dim_indices": lambda x: x.min(0).indices,
    "argmax": lambda x: x.argmax(),
    "argmin_dim": lambda x: x.argmin(-1),
    "cumsum": lambda x: x.cumsum(-1),
    "cumsum_dim0": lambda x: x.cumsum(0),
    "bitwise_and": lambda x: x & x.roll(1, -1),
    "bitwise_or": lambda x: x | x.roll(1, -1),
    "bitwise_xor": lambda x: x ^ x.roll(3, -1),
    "or_scalar": lambda x: x | 12345,
    "and_scalar": lambda x: x & 0xFFFF,
    "abs": lambda x: x.abs(),
    "neg": lambda x: -x,
    "minimum": lambda x: torch.minimum(x, x.roll(1, -1)),
    "maximum": lambda x: torch.maximum(x, x.flip(-1)),
    "clamp": lambda x: x.clamp(-(2**25), 2**25 + 1),
}
SHAPES = {"row": (1, 11), "odd": (3, 11), "column": (11, 1)}


def _tensor(dtype, shape, seed=0):
    base = torch.tensor(VALUES[dtype], dtype=dtype)
    g = torch.Generator().manual_seed(seed)
    n = shape[0] * shape[1]
    return base[torch.randint(0, len(base), (n,), generator=g)].reshape(shape)


def _on_device(fn, x):
    """``fn`` on a neuron copy of ``x`` (any layout: the copy keeps ``x``'s strides) against CPU:
    bit for bit, and no op through CPU fallback."""
    expected = fn(x)
    torch_neuronx.clear_op_tracking()
    got = fn(x.to("neuron"))
    assert_equal(got, expected)
    assert torch_neuronx.get_fallback_ops() == [], torch_neuronx.get_fallback_reasons()


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32], ids=str)
def test_integer_arithmetic_runs_on_the_device_exactly(op, shape, dtype):
    _on_device(OPS[op], _tensor(dtype, SHAPES[shape]))


@pytest.mark.parametrize("op", ["add", "mul", "sum_dim", "cumsum", "max_dim_indices", "bitwise_xor", "neg", "amax"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32], ids=str)
def test_non_contiguous_operands(op, dtype):
    x = _tensor(dtype, (6, 11), seed=1)
    _on_device(lambda t: OPS[op](t.t()), x)  # transposed
    _on_device(lambda t: OPS[op](t[:, ::2]), x)  # strided columns
    _on_device(lambda t: OPS[op](t[1:4, 3:]), x)  # an interior block


def test_int32_wraps_and_int64_keeps_large_values():
    x = torch.tensor([2**31 - 1, -(2**31), 16777217], dtype=torch.int32)
    _on_device(lambda t: t + 1, x)  # 2**31 - 1 + 1 wraps to -2**31
    _on_device(lambda t: t * 65536, x)
    _on_device(lambda t: t.sum(), x)  # int64 sum: 16777216
    _on_device(lambda t: t.cumsum(0, dtype=torch.int32), x)  # wraps in int32
    y = torch.tensor([1099511627773, 16777217, -(2**40)], dtype=torch.int64)
    _on_device(lambda t: t * 1, y)
    _on_device(lambda t: t * 2**23, y)  # 2**63 overflow wraps as CPU's
    _on_device(lambda t: t.cumsum(0), y)


def test_token_positions_from_an_attention_mask():
    # what Transformers does for position ids: (mask.cumsum(-1) - 1) masked, on int64
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 1, 1, 0, 1]], dtype=torch.int64)

    def positions(m):
        p = m.long().cumsum(-1) - 1
        return p.masked_fill(m == 0, 1), m.sum(-1), (m * p).amax(-1)

    expected = positions(mask)
    torch_neuronx.clear_op_tracking()
    for got, want in zip(positions(mask.to("neuron")), expected):
        assert_equal(got, want)
    assert torch_neuronx.get_fallback_ops() == [], torch_neuronx.get_fallback_reasons()


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16], ids=str)
def test_narrow_integers_wrap_as_cpu(dtype):
    info = torch.iinfo(dtype)
    x = torch.tensor([info.max, info.min, 100, info.max - 1, 1, 0, 7], dtype=dtype)
    for fn in (lambda t: t + t.roll(1), lambda t: t * t.roll(2), lambda t: t - t.flip(0), lambda t: -t):
        _on_device(fn, x)


def test_adaptive_eager_fuses_integer_arithmetic_exactly():
    x = _tensor(torch.int64, (3, 11), seed=2)
    torch_neuronx.set_adaptive_eager(True)
    try:
        _on_device(lambda t: ((t * 3 + t.roll(1, -1)).cumsum(-1) ^ t).amax(-1), x)
    finally:
        torch_neuronx.set_adaptive_eager(None)


def test_the_exact_executor_agrees():
    """A sample of the ops again with the ISA interpreted instruction by instruction."""
    code = """
        import sys, torch
        sys.path[:0] = [{tests!r}, {helpers!r}]
        from test_tnx_integer_arithmetic import OPS, SHAPES, _on_device, _tensor
        for name in ("add", "mul", "sum_dim", "prod_dim", "max_dim_indices", "argmin_dim", "cumsum", "bitwise_or",
                     "abs", "neg", "amax"):
            for dtype in (torch.int64, torch.int32):
                _on_device(OPS[name], _tensor(dtype, SHAPES["odd"]))
        print("ok")
    """
    tests = os.path.dirname(__file__)
    proc = run_python(code.format(tests=tests, helpers=os.path.dirname(tests)), env={"NEURON_SIM_MODE": "exact"}, timeout=900)
    assert proc.stdout.strip().endswith("ok")
