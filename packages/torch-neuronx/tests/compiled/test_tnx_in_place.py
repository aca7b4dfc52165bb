"""In-place and ``out=`` ops write their results straight into the written tensor when the in-place
plan allows it (the compiler's aliasing facts and the call's tensors), and through a temporary
copied in afterwards otherwise - with CPU's values either way, plain and adaptive eager."""

from __future__ import annotations

import re

import pytest
import torch
import torch_neuronx
from tnx_helpers import assert_close_to_cpu, op_records, run_python


def copies(recs) -> list:
    return [r for r in recs if r.name == "copy_d2d"]


CASES = {
    "add_": lambda x, y: x.add_(y),  # elementwise over x: in place
    "mul_self": lambda x, y: x.mul_(x),  # x read twice, both at each element's own index
    "add_out_aliasing_input": lambda x, y: torch.add(x, y, out=x),
    "cumsum_": lambda x, y: x.cumsum_(0),  # reads other elements of x than the one it writes
    "addcmul_": lambda x, y: x.addcmul_(y, y, value=0.5),
}
IN_PLACE = {"add_", "mul_self", "add_out_aliasing_input", "addcmul_"}  # cumsum_ needs a temporary


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("shape", [(5, 7), (130,), (1, 1)])
def test_in_place_ops_match_cpu_and_copy_only_when_needed(name, shape):
    fn = CASES[name]
    x, y = torch.randn(shape), torch.randn(shape)
    dx, dy = x.to("neuron"), y.to("neuron")
    fn(dx.clone(), dy)  # compile outside the recorded block
    with op_records() as recs:
        out = fn(dx, dy)
    expected = fn(x, y)
    assert out is dx
    assert_close_to_cpu(dx, expected)
    in_place = name in IN_PLACE or (name == "cumsum_" and shape[0] == 1)  # a cumsum over one element copies it
    assert len(copies(recs)) == (0 if in_place else 1), [(r.name, r.context) for r in recs]


def test_a_written_view_sharing_storage_with_another_input_goes_through_a_temporary():
    """``x[0].add_(x[1])``: the input is another view of the written tensor's storage."""
    x = torch.randn(3, 6)
    dx = x.to("neuron")
    dx[0].add_(dx[1])  # compiled outside the recorded block
    with op_records() as recs:
        dx[2].mul_(dx[0])
    x[0].add_(x[1])
    x[2].mul_(x[0])
    assert_close_to_cpu(dx, x)
    assert len(copies(recs)) == 1


def test_overlapping_writes_raise_cpus_error():
    x = torch.arange(12, dtype=torch.float32)
    for t in (x, x.to("neuron")):
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            t[1:].add_(t[:-1])


_VALUES = torch.Generator()


def _rand(device, *shape):
    """Uniform values drawn on the host (the same on both devices: neuron's own generator draws
    other numbers than CPU's for a seed), on ``device``."""
    return torch.rand(*shape, generator=_VALUES).to(device)


# Calls whose written tensor overlaps what they read in a way that is not plain in-place: CPU's
# kernel decides them (its error, or its values) - never a resize of a tensor the call reads.
ALIASING_CALLS = {
    "maximum_out_0d_input": lambda d: torch.maximum(_rand(d, 3), b := torch.tensor(0.5, device=d), out=b),
    "add_out_input_to_resize": lambda d: torch.add(b := _rand(d, 1), _rand(d, 3), out=b),
    "add__to_resize": lambda d: _rand(d, 1).add_(_rand(d, 3)),
    "exp_out_partly_its_input": lambda d: torch.exp((y := _rand(d, 4))[:2], out=y[1:3]),
    "cat_out_part_of_its_input": lambda d: torch.cat([(y := _rand(d, 4))[:2]], out=y),
    "cat_out_its_input": lambda d: torch.cat([y := _rand(d, 4)], out=y),
    "index_add__of_itself": lambda d: (a := _rand(d, 3, 3)).index_add_(0, torch.tensor([2, 0, 1], device=d), a),
    "sum_out_part_of_its_input": lambda d: torch.sum(a := _rand(d, 5), 0, keepdim=True, out=a[:1]),
    "cat_out_disjoint_view": lambda d: torch.cat([(y := _rand(d, 4))[:2]], out=y[2:]),
    "exp_out_its_input": lambda d: torch.exp(y := _rand(d, 4), out=y),
}


def _outcome(fn, device):
    _VALUES.manual_seed(0)
    try:
        result = fn(device)
        return "ok", result.cpu()
    except RuntimeError as err:
        return "error", str(err).split("\n")[0]


@pytest.mark.parametrize("adaptive", [False, True])
@pytest.mark.parametrize("name", sorted(ALIASING_CALLS))
def test_writes_overlapping_what_the_call_reads_do_what_cpu_does(name, adaptive):
    fn = ALIASING_CALLS[name]
    expected = _outcome(fn, "cpu")
    torch_neuronx.set_adaptive_eager(adaptive)
    try:
        got = _outcome(fn, "neuron")
    finally:
        torch_neuronx.set_adaptive_eager(False)
    assert got[0] == expected[0], (got, expected)
    if expected[0] == "error":
        assert got[1] == expected[1]
    else:
        assert_close_to_cpu(got[1], expected[1])


def test_cat_out_its_own_input_raises_at_the_call_instead_of_growing_it():
    """It resized ``x`` and dispatched again, doubling it until the simulated HBM (and the host)
    ran out of memory; the subprocess's address space is capped so a regression fails quickly."""
    proc = run_python("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
        import torch, torch_neuronx
        x = torch.tensor([7], dtype=torch.int16, device="neuron")
        try:
            torch.cat([x, x], 0, out=x)
        except RuntimeError as err:
            print(type(err).__name__, str(err).split(".")[0], list(x.shape), x.cpu().tolist())
    """)
    assert proc.stdout.strip() == ("RuntimeError unsupported operation: some elements of the input tensor and the "
                                   "written-to tensor refer to a single memory location [1] [7]")


@pytest.mark.parametrize("adaptive", [False, True])
def test_an_optimizer_step_updates_parameters_in_place(adaptive):
    torch.manual_seed(0)
    model = torch.nn.Linear(9, 5)
    ref = torch.nn.Linear(9, 5)
    ref.load_state_dict(model.state_dict())
    model.to("neuron")
    opt, ref_opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    torch_neuronx.set_adaptive_eager(adaptive)
    try:
        for _ in range(3):
            x = torch.randn(4, 9)
            for m, o, inp in ((model, opt, x.to("neuron")), (ref, ref_opt, x)):
                o.zero_grad()
                m(inp).square().mean().backward()
                o.step()
        torch.neuron.synchronize()
    finally:
        torch_neuronx.set_adaptive_eager(None)
    for got, expected in zip(model.parameters(), ref.parameters()):
        assert_close_to_cpu(got.detach(), expected.detach())


REDUCTIONS_INTO_OUT = {
    "sum": lambda x, out: torch.sum(x, 0, out=out),
    "sum_all": lambda x, out: torch.sum(x, [], out=out),
    "prod": lambda x, out: torch.prod(x, 0, out=out),
    "cumsum": lambda x, out: torch.cumsum(x, 0, out=out),
    "cumprod": lambda x, out: torch.cumprod(x, 0, out=out),
    "mean": lambda x, out: torch.mean(x, 0, out=out),
}


@pytest.mark.parametrize("adaptive", [False, True])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float16], ids=str)
@pytest.mark.parametrize("name", sorted(REDUCTIONS_INTO_OUT))
def test_a_reduction_into_an_out_of_another_dtype_computes_in_the_outs_dtype(name, dtype, adaptive):
    # fuzz-34: CPU converts each element to the out= tensor's dtype first (-0.5 + -0.75 + -0.75
    # sums to 0 into an int32 out=); summing in float and casting the total gave -2.
    fn = REDUCTIONS_INTO_OUT[name]
    x = torch.tensor([[-0.5, 1.75], [-0.75, 2.5], [-0.75, 3.25]])
    expected = torch.empty(0, dtype=dtype)
    try:
        fn(x, expected)
    except RuntimeError as err:  # mean refuses an integer out=
        with pytest.raises(RuntimeError, match=re.escape(str(err).splitlines()[0])):
            fn(x.to("neuron"), torch.empty(0, dtype=dtype, device="neuron"))
        return
    torch_neuronx.set_adaptive_eager(adaptive)
    try:
        got = torch.empty(0, dtype=dtype, device="neuron")
        fn(x.to("neuron"), got)
        got = got.cpu()
    finally:
        torch_neuronx.set_adaptive_eager(False)
    assert got.dtype == expected.dtype and torch.equal(got, expected), (got, expected)
