"""``torch.compiler.set_default_backend("neuron")`` + ``model.compile()``, as the announcement's
compiled loop writes it, for any module: a bare ``nn.Linear`` (Dynamo runs torch.nn's own frames
eagerly, as on CPU - it must not start tracing our kernels instead) and a user model, which
compiles through neuron. A fresh interpreter each: the default backend is process-wide."""

from __future__ import annotations

from tnx_helpers import run_python

COUNTING = """
import torch, torch_neuronx
from torch_neuronx.dynamo import neuron_backend
graphs = {"cpu": 0, "neuron": 0}
def counting(device, backend):
    def compile_graph(gm, example_inputs, **kw):
        graphs[device] += 1
        return backend(gm, example_inputs, **kw)
    return compile_graph
"""


def test_model_compile_of_a_single_linear():
    out = run_python("""
import torch, torch_neuronx
torch.compiler.set_default_backend("neuron")
model = torch.nn.Linear(8, 8).to("neuron")
model.compile()
x = torch.randn(4, 8, device="neuron")
y = model(x)
print("linear", torch.allclose(y.cpu(), torch.nn.functional.linear(x.cpu(), model.weight.cpu(), model.bias.cpu()),
                               rtol=1e-5, atol=1e-5))
""", env={"TORCH_NEURONX_COMPILE_LOG": "0"}, timeout=300)
    assert out.stdout.split()[-2:] == ["linear", "True"], out.stdout + out.stderr[-2000:]


def test_variants_see_the_same_graphs_as_on_cpu_and_train():
    out = run_python(COUNTING + """
def build(device):
    torch.manual_seed(0)
    return [torch.nn.Linear(8, 8, bias=False), torch.nn.Linear(1, 1), torch.nn.Linear(130, 7),
            torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.ReLU())]

inputs = [torch.randn(4, 8), torch.randn(1, 1), torch.randn(3, 5, 130), torch.randn(2, 9).t()[:5].t()]
for device, backend in (("cpu", lambda gm, ex, **kw: gm.forward), ("neuron", neuron_backend)):
    torch._dynamo.reset()
    torch.compiler.set_default_backend(counting(device, backend))
    for module, x in zip(build(device), inputs):
        module = module.to(device)
        module.compile()
        xd = x.detach().to(device).requires_grad_()
        y = module(xd)
        y.sum().backward()
        if device == "neuron":
            ref = module.to("cpu")
            xr = x.detach().clone().requires_grad_()
            ref(xr).sum().backward()
            print("match", torch.allclose(y.detach().cpu(), ref(x), rtol=1e-4, atol=1e-5)
                  and torch.allclose(xd.grad.cpu(), xr.grad, rtol=1e-4, atol=1e-5))
print("graphs", graphs["cpu"], graphs["neuron"])
""", env={"TORCH_NEURONX_COMPILE_LOG": "0"}, timeout=600)
    lines = out.stdout.splitlines()
    assert [line for line in lines if line.startswith("match")] == ["match True"] * 4, out.stdout + out.stderr[-2000:]
    cpu, neuron = lines[-1].split()[1:]
    assert cpu == neuron, lines[-1]  # Dynamo traced nothing of ours


def test_a_user_model_compiles_through_neuron_and_trains():
    out = run_python("""
import torch, torch_neuronx
torch.compiler.set_default_backend("neuron")

class MyModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(13, 32), torch.nn.Linear(32, 3, bias=False)
    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))

def train(device, compiled):
    torch.manual_seed(0)
    model = MyModel().to(device)
    if compiled:
        model.compile()
    optimizer = torch.optim.AdamW(model.parameters())
    losses = []
    for step in range(3):
        batch = torch.randn(6, 13, generator=torch.Generator().manual_seed(step)).to(device)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(batch), torch.ones(6, 3, device=device))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses

got, expected = train("neuron", True), train("cpu", False)
print("losses", all(abs(a - b) < 1e-4 for a, b in zip(got, expected)))
print("compiled", torch_neuronx.compile_metrics()["graphs_compiled"])
""", env={"TORCH_NEURONX_COMPILE_LOG": "0"}, timeout=600)
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert lines["losses"] == "True", out.stdout + out.stderr[-2000:]
    assert int(lines["compiled"]) >= 2  # its forward and backward
