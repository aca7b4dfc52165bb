"""Inputs torch-mlir crashed on kill no process: eager ops lower them (or fall back to CPU, which
raises CPU's own error), compiled graphs lower them or raise NeuronCompileError. Run in fresh
interpreters, so a crash fails these tests instead of the suite."""

from __future__ import annotations

from tnx_helpers import run_python


def test_index_put_without_indices_raises_cpus_error():
    """Killed the process with SIGSEGV in torch-mlir's pass pipeline."""
    out = run_python("""
import torch, torch_neuronx, warnings
warnings.simplefilter("ignore")
from torch_neuronx.dynamo import NeuronCompileError
cases = [(torch.rand([]), torch.tensor([1.0])), (torch.rand([]), torch.tensor(1.0)), (torch.rand(3), torch.tensor([1.0]))]
for x, v in cases:
    try:
        x.index_put([], v, True)
        cpu = "no error"
    except RuntimeError as err:
        cpu = str(err).splitlines()[0][:60]
    try:
        x.to("neuron").index_put([], v.to("neuron"), True).cpu()
        dev = "no error"
    except RuntimeError as err:
        dev = "same" if cpu in str(err) else str(err)
    print("eager", dev)
try:
    torch.compile(lambda x, v: x.index_put([], v, True), backend="neuron")(cases[0][0].to("neuron"), cases[0][1].to("neuron"))
except Exception as err:
    print("compiled", "NeuronCompileError" in str(err) and "empty index list" in str(err))
""", env={"TORCH_NEURONX_COMPILE_LOG": "0"}, timeout=300)
    assert out.stdout.splitlines() == ["eager same"] * 3 + ["compiled True"], out.stdout + out.stderr[-2000:]


def test_broadcasting_clamp_min_and_friends():
    """PyTorch's test_broadcasting_clamp_min (float32) aborted the process (LLVM ERROR in
    torch-mlir): a bound that broadcasts ``self``. Now each runs on the device and matches CPU."""
    out = run_python("""
import torch, torch_neuronx
pairs = [((1,), ()), ((2,), ()), ((1,), (2,)), ((2,), (2,)), ((2, 1), (2,)), ((1, 2), (2,)), ((3, 2), (2,)),
         ((3, 2), (3, 2)), ((1, 3, 2), (2,)), ((1, 3, 2), (3, 2)), ((3, 1, 2), (3, 2)), ((1, 3, 2), (1, 3, 2)),
         ((2, 3, 2), ()), ((2, 3, 2), (2, 3, 2)), ((3, 1, 2), (1, 3, 2))]
ops = [torch.clamp_min, torch.clamp_max, lambda a, b: torch.clamp(a, b, b + 1), lambda a, b: torch.clamp(b, a)]
bad = []
for i, (lhs, rhs) in enumerate(pairs):
    a, b = torch.randn(lhs), torch.randn(rhs)
    for j, op in enumerate(ops):
        expected = op(a, b)
        if not torch.equal(op(a.to("neuron"), b.to("neuron")).cpu(), expected):
            bad.append(("eager", lhs, rhs, j))
        if expected.shape != a.shape or j == 3:  # the bound broadcasts self: compiled too
            compiled = torch.compile(op, backend="neuron", dynamic=False)(a.to("neuron"), b.to("neuron"))
            if not torch.equal(compiled.cpu(), expected):
                bad.append(("compiled", lhs, rhs, j))
print("mismatches", bad)
print("fallback", [op for op in torch_neuronx.get_fallback_ops() if "clamp" in op])
""", env={"TORCH_NEURONX_COMPILE_LOG": "0"}, timeout=900)
    assert out.stdout.splitlines()[-2:] == ["mismatches []", "fallback []"], out.stdout + out.stderr[-2000:]
