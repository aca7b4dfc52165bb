"""Property-based fuzz: random sequences of elementwise / reduction / matmul / view / indexing /
in-place ops on random shapes and dtypes, applied to a CPU tensor and its neuron copy, give the
same results or raise the same exception type. Integer and bool results are equal bit for bit;
floating results match within the dtype's tolerance (ops compiled for the NeuronCore compute in
fp32 and round once, in their own reduction order).

A launch error surfaces at the next synchronization as neuron_sim's ExecutionError; its
``original`` is the exception the op raised, and that is what is compared with CPU's.
``TNX_FUZZ_EXAMPLES`` raises the example count (default kept small so the suite stays fast).
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from neuron_sim.errors import ExecutionError
from tnx_helpers import ALL_DTYPES

EXAMPLES = int(os.environ.get("TNX_FUZZ_EXAMPLES", "150"))


def _rand(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        x = torch.randn(shape, generator=g) * 3
        return x.to(dtype)
    return torch.randint(-8 if dtype != torch.uint8 else 0, 9, shape, generator=g).to(dtype)


def _dim(x, k):
    return k % x.dim() if x.dim() else 0


def _index(x, k):
    # In range most of the time; sometimes out of range (an error both must report).
    n = x.shape[_dim(x, k)] if x.dim() else 1
    return torch.tensor([k % (n + 1), 0, (k * 7) % max(n, 1)])


# name -> fn(x, k) where k is a random int parameter. Every op must be deterministic.
OPS = {
    # elementwise
    "add": lambda x, k: x + (k % 5 - 2),
    "add_self": lambda x, k: x + x,
    "sub_flip": lambda x, k: x - x.flip(_dim(x, k)) if x.dim() else x - x,
    "mul": lambda x, k: x * x,
    "neg": lambda x, k: -x,
    "abs": lambda x, k: x.abs(),
    "div": lambda x, k: x / (k % 3 + 1),
    "floor_div": lambda x, k: torch.div(x, k % 3 + 1, rounding_mode="floor"),
    "exp": lambda x, k: x.exp(),
    "sigmoid": lambda x, k: torch.sigmoid(x),
    "relu": lambda x, k: torch.relu(x),
    "clamp": lambda x, k: x.clamp(-2, k % 4),
    "pow": lambda x, k: x.pow(2),
    "sqrt": lambda x, k: x.abs().sqrt(),
    "gt": lambda x, k: x > (k % 3 - 1),
    "eq": lambda x, k: x == x.flip(0) if x.dim() else x == x,
    "where": lambda x, k: torch.where(x > 0, x, x * 2),
    "bitwise_not": lambda x, k: ~x,
    "logical_and": lambda x, k: torch.logical_and(x, x.flip(0) if x.dim() else x),
    "cast": lambda x, k: x.to(ALL_DTYPES[k % len(ALL_DTYPES)]),
    "maximum": lambda x, k: torch.maximum(x, x.flip(0)) if x.dim() else x,
    "remainder": lambda x, k: torch.remainder(x, k % 3 + 2),
    "rad2deg": lambda x, k: torch.rad2deg(x),  # int -> float with a wrapped double constant
    # reductions
    "sum": lambda x, k: x.sum(),
    "sum_dim": lambda x, k: x.sum(dim=_dim(x, k), keepdim=bool(k % 2)),
    "mean_dim": lambda x, k: x.mean(dim=_dim(x, k)),
    "amax": lambda x, k: x.amax(dim=_dim(x, k)),
    "argmax": lambda x, k: x.argmax(dim=_dim(x, k)),
    "min": lambda x, k: x.min(),
    "prod": lambda x, k: x.prod(dim=_dim(x, k)),
    "cumsum": lambda x, k: x.cumsum(dim=_dim(x, k)),
    "any": lambda x, k: x.any(),
    "all_dim": lambda x, k: x.all(dim=_dim(x, k)),
    "softmax": lambda x, k: x.softmax(dim=_dim(x, k)),
    "var": lambda x, k: x.var(dim=_dim(x, k)),
    "sort": lambda x, k: x.sort(dim=_dim(x, k), stable=True).values,
    "topk": lambda x, k: x.topk(1, dim=_dim(x, k)).values,
    # matmul
    "matmul_t": lambda x, k: x @ x.transpose(-1, -2) if x.dim() >= 2 else x @ x,
    "matmul_shape": lambda x, k: x @ x,  # square or a shape error
    "mv": lambda x, k: x.reshape(x.shape[0], -1) @ x.reshape(x.shape[0], -1)[0] if x.dim() else x * x,
    "einsum": lambda x, k: torch.einsum("i...,i...->...", x, x) if x.dim() else x,
    # views
    "transpose": lambda x, k: x.transpose(0, -1) if x.dim() else x,
    "reshape": lambda x, k: x.reshape(-1),
    "view_flat": lambda x, k: x.view(-1),  # fails for some non-contiguous inputs, on both
    "unsqueeze": lambda x, k: x.unsqueeze(k % (x.dim() + 1)),
    "squeeze": lambda x, k: x.squeeze(),
    "flip": lambda x, k: x.flip(_dim(x, k)) if x.dim() else x,
    "permute": lambda x, k: x.permute(*reversed(range(x.dim()))),
    "narrow": lambda x, k: x.narrow(_dim(x, k), 0, max(1, x.shape[_dim(x, k)] // 2)) if x.dim() else x,
    "step_slice": lambda x, k: x[:: (k % 3 + 1)] if x.dim() else x,
    "expand": lambda x, k: x.unsqueeze(0).expand(2, *x.shape),
    "contiguous": lambda x, k: x.contiguous(),
    "diagonal": lambda x, k: x.diagonal(dim1=0, dim2=-1) if x.dim() >= 2 else x,
    "view_dtype": lambda x, k: x.view(torch.uint8),
    "cat": lambda x, k: torch.cat([x, x], dim=_dim(x, k)) if x.dim() else x,
    "stack": lambda x, k: torch.stack([x, x]),
    "clone": lambda x, k: x.clone(),
    # indexing
    "index_select": lambda x, k: x.index_select(_dim(x, k), _index(x, k).to(x.device)),
    "fancy_index": lambda x, k: x[_index(x, k).to(x.device)],
    "mask_select": lambda x, k: x[x > 0] if x.dtype != torch.bool else x[x],
    "gather": lambda x, k: x.gather(_dim(x, k), torch.zeros_like(x, dtype=torch.long)) if x.dim() else x,
    "int_index": lambda x, k: x[k % 4] if x.dim() else x,
    "nonzero": lambda x, k: torch.nonzero(x),
    # in place (return the mutated tensor)
    "add_": lambda x, k: x.clone().add_(k % 3),
    "mul_float_": lambda x, k: x.clone().mul_(1.5),  # int/bool: the same casting error
    "setitem": lambda x, k: _setitem(x, k),
    "index_put": lambda x, k: x.clone().index_put_((_index(x, k).to(x.device),), torch.ones((), dtype=x.dtype, device=x.device))
    if x.dim() else x,
    "transpose_": lambda x, k: x.clone().t_() if x.dim() <= 2 else x,
    "fill_diag": lambda x, k: x.clone().fill_diagonal_(1) if x.dim() >= 2 else x,
}


def _setitem(x, k):
    y = x.clone()
    if y.dim():
        y[k % max(y.shape[0], 1) :: 2] = 1
    return y


def _tolerance(dtype: torch.dtype) -> dict:
    if dtype in (torch.bfloat16, torch.float16):
        return dict(rtol=2e-2, atol=2e-2)
    if dtype == torch.float32:
        return dict(rtol=1e-4, atol=1e-5)
    return dict(rtol=0, atol=0)


def _run(fn, *args):
    """(result, None) or (None, exception type), with asynchronous errors collected."""
    try:
        out = fn(*args)
        if isinstance(out, torch.Tensor) and out.device.type == "neuron":
            torch.neuron.synchronize()
        return out, None
    except ExecutionError as err:
        return None, type(err.original)
    except Exception as err:  # noqa: BLE001 - the type is what is compared
        return None, type(err)


@pytest.mark.filterwarnings("ignore:var\\(\\). degrees of freedom")  # CPU's own warning, for both sides
# No shrinking: every shrink step compiles new op signatures (minutes); the failing example and
# its op history are reported as found.
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    dtype=st.sampled_from(ALL_DTYPES),
    shape=st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple),
    seed=st.integers(0, 2**16),
    steps=st.lists(st.tuples(st.sampled_from(sorted(OPS)), st.integers(0, 100)), min_size=1, max_size=6),
)
def test_random_op_sequences_match_cpu(dtype, shape, seed, steps):
    cpu = _rand(shape, dtype, seed)
    dev = cpu.to("neuron")
    history = [f"{list(shape)}:{dtype}"]
    for name, k in steps:
        history.append(f"{name}({k})")
        expected, cpu_error = _run(OPS[name], cpu, k)
        actual, dev_error = _run(OPS[name], dev, k)
        assert cpu_error == dev_error, f"{' -> '.join(history)}: cpu raised {cpu_error}, neuron raised {dev_error}"
        if cpu_error is not None:
            return
        assert actual.device.type == "neuron", " -> ".join(history)
        # Strides of size-0/1 dimensions (and of tensors with at most one element) carry no layout.
        strides = tuple(tuple(st for n, st in zip(t.shape, t.stride()) if n > 1) if expected.numel() > 1 else ()
                        for t in (actual, expected))
        assert (actual.dtype, actual.shape, strides[0]) == (expected.dtype, expected.shape, strides[1]), (
            f"{' -> '.join(history)}: {actual.dtype} {tuple(actual.shape)} {actual.stride()} vs "
            f"{expected.dtype} {tuple(expected.shape)} {expected.stride()}"
        )
        torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, msg=lambda m: " -> ".join(history) + "\n" + m,
                                   **_tolerance(expected.dtype))
        cpu, dev = expected, actual
