"""Graphs torch-mlir lowered wrongly, refused or crashed on (fuzz findings), eager and compiled,
against CPU: bool max/min, abs of unsigned, cumsum to 8-bit integers, negative advanced
indices, fmod by a number, dim ops over 0-dim tensors, zero-size gathers, int64 slice assignments."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch_neuronx
from tnx_helpers import assert_equal
from torch_neuronx.dynamo import NeuronCompileFallbackWarning

N = "neuron"


def compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="neuron", dynamic=False)


@pytest.mark.parametrize("compile", [False, True], ids=["eager", "compiled"])
def test_bool_max_and_min(compile):
    run = compiled if compile else (lambda f: f)
    for fn in (torch.amax, torch.amin, torch.max, torch.min, lambda x: torch.max(x, 1), lambda x: x.amin(0)):
        for x in (torch.zeros(2, 3, dtype=torch.bool), torch.ones(2, 3, dtype=torch.bool),
                  torch.tensor([[True, False, False], [False, False, False]])):
            expected = fn(x)
            got = run(fn)(x.to(N))
            for g, e in zip(got if isinstance(got, tuple) else [got], expected if isinstance(expected, tuple) else [expected]):
                assert_equal(g, e)


@pytest.mark.parametrize("compile", [False, True], ids=["eager", "compiled"])
def test_cumsum_to_8_bit_integers(compile):
    run = compiled if compile else (lambda f: f)
    x = torch.tensor([7, 127, 100, -3, 250])
    for dtype in (torch.int8, torch.uint8):
        assert_equal(run(lambda x, dtype=dtype: x.cumsum(0, dtype=dtype))(x.to(N)), x.cumsum(0, dtype=dtype))


def test_compiled_abs_of_uint8():
    x = torch.tensor([0, 3, 200, 255], dtype=torch.uint8)
    assert_equal(compiled(torch.abs)(x.to(N)), x)


def test_compiled_negative_indices_as_the_fuzz_wrote_them():
    got = compiled(lambda x: x[torch.tensor([-5, -3], device=x.device)])(torch.arange(5, device=N))
    assert_equal(got, torch.tensor([0, 2]))


def test_compiled_index_put_at_negative_indices():
    x, i, v = torch.zeros(4, 3), torch.tensor([-1, 0, -4]), torch.tensor([1.0, 2.0, 3.0])
    fn = lambda x, i, v: x.index_put((i,), v, True)  # noqa: E731
    assert_equal(compiled(fn)(x.to(N), i.to(N), v.unsqueeze(1).expand(3, 3).to(N)), fn(x, i, v.unsqueeze(1).expand(3, 3)))


@pytest.mark.parametrize("x, divisor", [(torch.tensor([1.0, -2.5]), 0.0), (torch.tensor([5.5, -7.0]), 2.0),
                                        (torch.tensor([7, -7, 3], dtype=torch.int8), -2)])
def test_compiled_fmod_by_a_number(x, divisor):
    got = compiled(lambda x: torch.fmod(x, divisor))(x.to(N)).cpu()
    expected = torch.fmod(x, divisor)
    assert got.dtype == expected.dtype and torch.equal(got.nan_to_num(7.0), expected.nan_to_num(7.0))


def test_dim_ops_over_0dim_tensors():
    x = torch.tensor(5)
    assert_equal(compiled(lambda x: x.sum(-1))(x.to(N)), x.sum(-1))
    src, i = torch.tensor(1.5), torch.tensor(0)
    assert_equal(compiled(lambda s, i: s.scatter_add(0, i, s))(src.to(N), i.to(N)), src.scatter_add(0, i, src))
    u = torch.tensor(255, dtype=torch.uint8)
    for got, expected in zip(u.to(N).topk(0, 0), u.topk(0, 0)):
        assert_equal(got, expected)


def test_compiled_gather_over_a_size_0_dim_raises():
    """CPU raises (every index is out of bounds); building the gather aborted the process."""
    x, i = torch.empty(2, 0), torch.zeros(2, 1, dtype=torch.long)
    with pytest.raises(RuntimeError, match="out of bounds"):
        x.gather(1, i)
    with pytest.raises(RuntimeError, match="every index is out of bounds"):
        compiled(lambda x, i: x.gather(1, i))(x.to(N), i.to(N))


def _shift_tokens_right(labels, pad_token_id=0, start_token_id=2):
    """As Transformers' t5 / bart / whisper make decoder inputs from the labels."""
    shifted = labels.new_zeros(labels.shape)
    shifted[:, 1:] = labels[:, :-1].clone()
    shifted[:, 0] = start_token_id
    return shifted.masked_fill_(shifted == -100, pad_token_id)


@pytest.mark.parametrize("compile", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("shape", [(2, 5), (1, 1), (3, 130)])
def test_slice_assignment_of_int64_labels_on_the_device(compile, shape):
    """A contiguous slice assignment is copies, exact for any int64: it used to be a scatter through
    fp32, refused as inexact (the compiled graph ran eagerly, the eager op fell back to CPU)."""
    labels = torch.randint(-2**40, 2**40, shape)
    labels[0, -1] = -100
    torch_neuronx.clear_op_tracking()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NeuronCompileFallbackWarning)
        got = (compiled if compile else (lambda f: f))(_shift_tokens_right)(labels.to(N))
    assert_equal(got, _shift_tokens_right(labels))
    assert "aten::slice_scatter" not in torch_neuronx.get_fallback_ops()
