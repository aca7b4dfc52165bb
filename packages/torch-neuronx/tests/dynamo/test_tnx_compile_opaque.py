"""Dynamo never traces the device's own code: after a graph break (``nonzero``) the eager ops run
without Dynamo compiling our kernels or dispatcher, and a call of ours inside a compiled function
(``torch.neuron.current_stream()``) runs as one skipped call, as ``torch.accelerator``'s do - from
the first frame of a fresh process, whether Dynamo loads before or after torch_neuronx. Traced,
our code gave HF models tens of graph breaks, empty host-only graphs and warnings about
``torch_neuronx._C`` builtins."""

from __future__ import annotations

import pytest
from tnx_helpers import run_python

# Each function compiled in a fresh interpreter: graphs counted by a backend that wraps ours,
# warnings recorded, result compared with the same function on CPU.
SCRIPT = """
import sys, warnings
IMPORTS
import torch_neuronx
print("dynamo_loaded_first", DYNAMO_FIRST)
from torch._dynamo.utils import counters
from torch_neuronx.dynamo import neuron_backend

graphs = []
def counting(gm, example_inputs, **kw):
    graphs.append(sum(n.op == "call_function" for n in gm.graph.nodes))
    on_neuron = any(isinstance(t, torch.Tensor) and t.device.type == "neuron" for t in example_inputs)
    return neuron_backend(gm, example_inputs, **kw) if on_neuron else gm.forward

def nonzero_break(x, w):
    idx = torch.nonzero(x[:, 0] > 0).squeeze(1)     # a graph break before any op
    y = torch.softmax(x[idx] @ w, -1)
    return y.sum(0) + torch.nonzero(y > 0.5).shape[0]  # and another in the middle

def neuron_calls(x, w):
    torch.neuron.current_stream()
    n = torch.neuron.memory_allocated()
    y = (x @ w).relu()
    return y * (n > 0) + torch.nonzero(y).shape[0]

x = torch.randn(9, 5); x[0, 0] = 1.0
w = torch.randn(5, 130)
for fn in (neuron_calls, nonzero_break):  # ours first: before any graph reached the backend
    torch._dynamo.reset(); counters.clear(); graphs.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(fn, backend=counting)(x.to("neuron"), w.to("neuron"))
    ours = [str(c.message).splitlines()[0] for c in caught if "torch_neuronx" in str(c.message)]
    reasons = sorted({("ours" if "torch_neuronx" in r else r.split(chr(10))[0]) for r in counters["graph_break"]})
    print(fn.__name__, "graphs", graphs, "breaks", sum(counters["graph_break"].values()), reasons)
    print(fn.__name__, "warnings", ours)
    print(fn.__name__, "match", torch.allclose(got.cpu(), fn(x, w), rtol=1e-4, atol=1e-4))
torch._dynamo.reset(); graphs.clear()
torch.compile(nonzero_break, backend=counting)(x, w)
print("cpu graphs", graphs)
"""

ORDERS = {
    # torch's backend autoload imports torch_neuronx with torch; Dynamo loads at the first compile.
    "dynamo_after": dict(imports="import torch", dynamo_first="'torch._dynamo.trace_rules' in sys.modules", env={}),
    "dynamo_before": dict(imports="import torch, torch._dynamo", dynamo_first="True", env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}),
}


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_graph_breaks_see_none_of_our_code(order):
    case = ORDERS[order]
    out = run_python(
        SCRIPT.replace("IMPORTS", case["imports"]).replace("DYNAMO_FIRST", case["dynamo_first"]),
        env={"TORCH_NEURONX_COMPILE_LOG": "0", **case["env"]},
        timeout=900,
    )
    lines = {tuple(line.split(" ", 2)[:2]): line.split(" ", 2)[2] for line in out.stdout.splitlines() if line.count(" ") >= 2}
    loaded_first = [line for line in out.stdout.splitlines() if line.startswith("dynamo_loaded_first")]
    assert loaded_first == [f"dynamo_loaded_first {order == 'dynamo_before'}"], out.stdout
    nonzero = "Dynamic shape operator"
    # Two breaks, each on nonzero: three graphs, the ops of each as on CPU.
    assert lines[("cpu", "graphs")] == "[2, 4, 1]", out.stdout
    assert lines[("nonzero_break", "graphs")] == f"[2, 4, 1] breaks 2 ['{nonzero}']", out.stdout
    # Our two calls are skipped (each runs as it is: a break before any op), then nonzero breaks:
    # the graph before it (matmul, relu) and the one after (the add).
    assert lines[("neuron_calls", "graphs")] == f"[2, 1] breaks 3 ['{nonzero}', 'ours']", out.stdout
    for fn in ("nonzero_break", "neuron_calls"):
        assert lines[(fn, "warnings")] == "[]", out.stdout
        assert lines[(fn, "match")] == "True", out.stdout + out.stderr[-3000:]
