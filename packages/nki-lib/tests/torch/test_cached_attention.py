"""nkilib.torch.paged_attention / decode_attention on neuron tensors (eager and compiled) against
the plain torch computation on CPU, the fast forms against the kernels' instructions, the
fallback, and a block table pointing outside the cache on the device."""

import pytest
import torch
import torch_neuronx
from neuron_sim import ExecutionError
from nkilib.attention.paged_attention import decode_attention_kernel, paged_attention_kernel
from nkilib.torch import NkilibFallbackWarning, decode_attention, paged_attention
from nkilib.torch.attention import cached_attention_plain, gather_cache
from nkilib_torch_helpers import DTYPES, assert_close, inputs
from torch_neuronx.nki_integration import call_kernel
from torch_neuronx.testing import check_fast_form

TOLERANCE = {torch.float32: {"rtol": 2e-5, "atol": 2e-5}, torch.bfloat16: {"rtol": 8e-3, "atol": 8e-3}}


def _paged(b=2, hq=4, hkv=2, sq=1, d=64, bs=16, blocks=20, width=9, lens=(100, 3), dtype=torch.float32, seed=0):
    q, kc, vc = inputs((b, hq, sq, d), (blocks, bs, hkv, d), (blocks, bs, hkv, d), dtype=dtype, seed=seed)
    tables = torch.randint(0, blocks, (b, width), generator=torch.Generator().manual_seed(seed), dtype=torch.int32)
    return q, kc, vc, tables, torch.tensor(lens, dtype=torch.int32)


def _reference(q, kc, vc, tables, lens):
    f = [t.float() for t in (q, kc, vc)]
    return cached_attention_plain(f[0], gather_cache(f[1], tables), gather_cache(f[2], tables), lens)


@pytest.mark.parametrize("sq", [1, 5], ids=["decode", "chunk5"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_eager_paged_matches_plain_torch(dtype, sq):
    args = _paged(sq=sq, lens=(100, 7), dtype=dtype)
    out = paged_attention(*(t.to("neuron") for t in args))
    assert out.device.type == "neuron" and out.dtype == dtype
    assert_close(out.cpu(), _reference(*args), dtype)
    assert "nki::paged_attention_kernel" in torch_neuronx.get_executed_ops()


def test_eager_contiguous_cache_matches_plain_torch():
    q, kc, vc = inputs((3, 2, 1, 128), (3, 130, 1, 128), (3, 130, 1, 128), seed=1)
    lens = torch.tensor([130, 1, 64], dtype=torch.int32)
    out = decode_attention(*(t.to("neuron") for t in (q, kc, vc, lens)))
    assert_close(out.cpu(), cached_attention_plain(q, kc.transpose(1, 2), vc.transpose(1, 2), lens), torch.float32)
    assert "nki::decode_attention_kernel" in torch_neuronx.get_executed_ops()


def test_compiled_decode_step(strict):
    q, kc, vc, tables, lens = _paged(sq=2, lens=(33, 140), seed=2)

    def step(q, kc, vc, tables, lens):
        return paged_attention(q * 0.5, kc, vc, tables, lens).sum(1)

    out = torch.compile(step, backend="neuron")(*(t.to("neuron") for t in (q, kc, vc, tables, lens)))
    assert_close(out.cpu(), _reference(q * 0.5, kc, vc, tables, lens).sum(1), torch.float32)
    assert "nki::paged_attention_kernel" in torch_neuronx.get_executed_ops()


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_fast_forms_match_the_instructions(dtype):
    q, kc, vc, tables, lens = (t.to("neuron") for t in _paged(sq=3, dtype=dtype, seed=3))
    check_fast_form(paged_attention_kernel, q, kc, vc, tables, lens, 0.125, **TOLERANCE[dtype])
    k2, v2 = (t.to("neuron") for t in inputs((2, 150, 2, 64), (2, 150, 2, 64), dtype=dtype, seed=4))
    check_fast_form(decode_attention_kernel, q, k2, v2, lens, 0.125, **TOLERANCE[dtype])


def test_unsupported_calls_run_plain_torch():
    q, kc, vc, tables, lens = _paged(seed=5)
    dev = [t.to("neuron") for t in (q, kc, vc, tables, lens)]
    with pytest.warns(NkilibFallbackWarning, match=r"\[nkilib.dtype\] block_tables has dtype int64"):
        out = paged_attention(*dev[:3], dev[3].long(), dev[4])
    assert_close(out.cpu(), _reference(q, kc, vc, tables, lens), torch.float32)
    qg = dev[0].clone().requires_grad_()
    with pytest.warns(NkilibFallbackWarning, match=r"\[nkilib.attention.backward\]"):
        paged_attention(qg, *dev[1:]).sum().backward()
    assert qg.grad is not None and "nki::paged_attention_kernel" not in torch_neuronx.get_executed_ops()
    # CPU tensors: the plain computation, no warning
    assert_close(paged_attention(q, kc, vc, tables, lens), _reference(q, kc, vc, tables, lens), torch.float32)


def test_a_table_entry_outside_the_cache_fails_the_launch():
    """Device tables are not read back: the launch fails at the next sync, in the fast form on the
    entry itself, in the kernel's instructions on the cache row it gathers (block 20 * 16 tokens)."""
    q, kc, vc, tables, lens = _paged(seed=6)
    tables[1, 4] = 20  # the cache has 20 blocks
    dev = [t.to("neuron") for t in (q, kc, vc, tables, lens)]
    out = paged_attention(*dev)
    with pytest.raises(ExecutionError, match=r"index 20 is out of bounds for a dimension of size 20"):
        out.cpu()
    out = call_kernel(paged_attention_kernel, [*dev, 0.125], {}, executor="exact")
    with pytest.raises(ExecutionError, match=r"indirect DMA index 320 is outside the 320 rows of 'key_cache'"):
        out.cpu()
