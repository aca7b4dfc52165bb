"""No compile can eat the machine: slices at non-zero offsets (rotary embeddings, t5/bart/whisper)
compile forward and backward, and a lowering that still runs away or crashes is a
NeuronCompileError naming the graph and the bound (eager: a CPU fallback). Each case runs in a
fresh interpreter under an address space limit, so a regression fails instead of killing CI."""

from __future__ import annotations

from tnx_helpers import run_python

LIMIT = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))  # the lowering worker inherits it too
import torch, torch_neuronx
"""


def test_backward_of_a_slice_at_a_nonzero_offset():
    """The issue's repro: torch-mlir's lowering of this backward grew past 22 GB."""
    out = run_python(LIMIT + """
q = torch.randn(2, 16, device="neuron", requires_grad=True)
f = torch.compile(lambda q: (q[..., 8:] * 2).sum(), backend="neuron")
f(q).backward()
expected = torch.zeros(2, 16); expected[:, 8:] = 2
print("grad", torch.equal(q.grad.cpu(), expected))
""", env={"TORCH_NEURONX_COMPILE_LOG": "0"}, timeout=600)
    assert out.stdout.split()[-2:] == ["grad", "True"], out.stdout + out.stderr[-2000:]


def test_rotary_embeddings_and_slice_assignments_match_eager():
    out = run_python(LIMIT + """
def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

def rotary(q, cos, sin):                       # as Llama/Qwen apply it
    return (q * cos + rotate_half(q) * sin).sum()

def shifted(x):                                # t5/bart shift_tokens_right: a slice assignment
    y = torch.zeros_like(x)
    y[:, 1:] = x[:, :-1] * 3
    return (y * y).sum()

def window(x):                                 # odd offsets on both ends, a step
    return (x[:, 3:-2] * x[:, 5::2].sum(-1, keepdim=True)).sum()

cases = [(rotary, [(2, 3, 5, 16), (5, 16), (5, 16)]), (shifted, [(3, 7)]), (window, [(4, 17)]),
         (rotary, [(1, 1, 1, 2), (1, 2), (1, 2)])]
for fn, shapes in cases:
    args = [torch.randn(s) for s in shapes]
    ref = [a.clone().requires_grad_() for a in args]
    fn(*ref).backward()
    dev = [a.to("neuron").requires_grad_() for a in args]
    torch.compile(fn, backend="neuron", dynamic=False)(*dev).backward()
    ok = all(torch.allclose(d.grad.cpu(), r.grad, rtol=1e-4, atol=1e-5) for d, r in zip(dev, ref))
    print(fn.__name__, ok)
""", env={"TORCH_NEURONX_COMPILE_LOG": "0"}, timeout=900)
    assert [line.split()[-1] for line in out.stdout.splitlines()[-4:]] == ["True"] * 4, out.stdout + out.stderr[-2000:]


def test_a_lowering_past_its_bound_is_a_clear_error_or_a_fallback():
    """A lowering stopped at its time bound (0.1 ms: none can finish that fast) is a
    NeuronCompileError naming the graph and the bound; with the eager fallback option the graph
    runs op by op; in eager mode the op runs on CPU, with the bound as the reason."""
    out = run_python(LIMIT + """
import os, warnings
warnings.simplefilter("ignore")
from torch_neuronx.dynamo import NeuronCompileError
os.environ["NEURONX_CC_LOWERING_TIMEOUT"] = "0.0001"
x = torch.randn(7, 13, device="neuron")
try:
    torch.compile(lambda x: torch.atan2(x, x + 1).sum(0), backend="neuron")(x)
except Exception as err:
    print("compile", repr(str(err).splitlines()[1]))
y = torch.compile(lambda x: torch.atan2(x, x + 1).sum(0), backend="neuron", options={"fallback": "eager"})(x)
print("fallback", torch.allclose(y.cpu(), torch.atan2(x.cpu(), x.cpu() + 1).sum(0)))
z = torch.hypot(x, x * 3)                       # an eager op: compiled on its first call
print("eager", torch.allclose(z.cpu(), torch.hypot(x.cpu(), x.cpu() * 3)))
print("reason", repr(torch_neuronx.get_fallback_reasons().get("aten::hypot", "")))
""", env={"TORCH_NEURONX_COMPILE_LOG": "0", "TORCH_NEURONX_NEFF_DISABLE_CACHE": "1"}, timeout=600)
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert "cannot compile 'torch-mlir' in graph0_inference" in lines["compile"], lines
    assert "time bound of 0.0001 s (NEURONX_CC_LOWERING_TIMEOUT" in lines["compile"], lines
    assert lines["fallback"] == "True" and lines["eager"] == "True", lines
    assert "time bound of 0.0001 s" in lines["reason"], lines
