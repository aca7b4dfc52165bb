"""fuzz-49: a compiled fill / masked_fill of a number its dtype cannot hold raises CPU's error at
the call, whatever the mask (the decompositions converted the number unchecked: int8
``masked_fill_(m, 300)`` filled 44, ``-2**63`` filled 0); numbers the dtype holds (after CPU's
truncation, 1.5 -> 1) still compile and give CPU's values."""

from __future__ import annotations

import pytest
import torch

FILLS = {
    "masked_fill": lambda t, v: t.masked_fill(t < 2, v),
    "masked_fill_": lambda t, v: t.masked_fill_(t > 100, v),  # a mask with no True: CPU raises anyway
    "fill_": lambda t, v: t.fill_(v),
}


def _compiled(fn, t, v):
    torch._dynamo.reset()  # each number its own graph
    return torch.compile(fn, backend="neuron", dynamic=False)(t, v)


def _inner(err: BaseException) -> BaseException:
    return getattr(err, "inner_exception", None) or err


@pytest.mark.parametrize("name", sorted(FILLS))
@pytest.mark.parametrize(("dtype", "value"), [(torch.int8, 300), (torch.int8, -2**63), (torch.int8, 127.9),
                                              (torch.uint8, 256), (torch.float16, 1e10), (torch.bfloat16, 1e39)], ids=str)
def test_a_number_past_the_dtype_raises_cpus_error(neuron, name, dtype, value):
    fn, x = FILLS[name], torch.tensor([-6, 1, 7], dtype=torch.int16).to(dtype)
    with pytest.raises(RuntimeError) as want:
        fn(x.clone(), value)
    with pytest.raises(RuntimeError) as got:
        _compiled(fn, x.clone().to(neuron), value)
    assert type(_inner(got.value)) is type(want.value)
    assert str(want.value) in str(_inner(got.value))


@pytest.mark.parametrize("name", sorted(FILLS))
@pytest.mark.parametrize(("dtype", "value"), [(torch.int8, 127), (torch.int8, -128), (torch.int8, 1.5),
                                              (torch.float16, float("inf")), (torch.bfloat16, 3e38)], ids=str)
def test_a_number_the_dtype_holds_compiles_as_cpu(neuron, name, dtype, value):
    fn, x = FILLS[name], torch.tensor([-6, 1, 7], dtype=torch.int16).to(dtype)
    got = _compiled(fn, x.clone().to(neuron), value).cpu()
    assert torch.equal(got, fn(x.clone(), value))
