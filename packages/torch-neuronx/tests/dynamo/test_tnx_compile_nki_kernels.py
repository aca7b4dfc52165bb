"""NKI kernel ops inside torch.compile(backend="neuron") graphs: the graph is split around each
kernel's launch (ATen segments compiled to NEFFs, the kernel's own NEFF launched between them)."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch_neuronx
from tnx_helpers import cos_kernel, nki_sin_cos_ops, sin_kernel
from torch_neuronx import nki_op
from torch_neuronx.dynamo import NeuronCompileFallbackWarning

pt_nki_sin, pt_nki_cos = nki_sin_cos_ops("tnx_compile_kernels")


@nki_op("tnx_compile_kernels::sin_and_cos", mutates_args={})
def sin_and_cos(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s, c = torch.empty_like(x), torch.empty_like(x)
    sin_kernel(x, s)
    cos_kernel(x, c)
    return s, c


@nki_op("tnx_compile_kernels::sin_into", mutates_args={"out"})
def sin_into(x: torch.Tensor, out: torch.Tensor) -> None:
    sin_kernel(x, out)


@pytest.fixture
def strict():
    """No graph may fall back to eager: the compiled path is what is tested."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", NeuronCompileFallbackWarning)
        yield


def _graphs_since(before: int) -> list[str]:
    """The graphs compiled since, without their graph number (``forward_0``, ``backward_0``)."""
    return sorted(g["name"].split("_", 1)[1] for g in torch_neuronx.compile_metrics()["graphs"][before:])


def _graph_count() -> int:
    return len(torch_neuronx.compile_metrics()["graphs"])


@pytest.mark.parametrize("shape", [(128, 1), (128, 37), (128, 512)], ids=str)
def test_announcement_example_inside_a_compiled_function_forward_and_backward(neuron, strict, shape):
    def f(x):
        return pt_nki_sin(x * 2.0) + 1.0

    before = _graph_count()
    x_cpu = torch.randn(*shape)
    x = x_cpu.to(neuron).requires_grad_()
    y = torch.compile(f, backend="neuron")(x)
    y.sum().backward()
    torch.testing.assert_close(y.detach().cpu(), torch.sin(x_cpu * 2) + 1, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x.grad.cpu(), 2 * torch.cos(x_cpu * 2), rtol=1e-5, atol=1e-5)
    graphs = _graphs_since(before)
    # forward: x * 2 | sin kernel | + 1; backward: cos kernel | grad * cos * 2 (one segment)
    assert graphs == ["backward_0", "forward_0", "forward_1"], graphs
    # The graph launched the kernel's own NEFF: the same device time as the kernel called eagerly.
    compiled_ns = sin_kernel.last_device_time_ns
    pt_nki_sin(x.detach() * 2)
    assert compiled_ns == pytest.approx(sin_kernel.last_device_time_ns) and compiled_ns > 0


def test_kernel_is_a_launch_of_its_own_between_the_segments(neuron, strict):
    """Device order: the segment before the kernel, the kernel's NEFF, the segment after it, one
    queue; the kernel's simulated device time is its own NEFF's."""
    from neuron_sim.trace import global_sink

    def f(x):
        return pt_nki_sin(x + 1.0) * 3.0

    x = torch.randn(128, 8, device=neuron)
    compiled = torch.compile(f, backend="neuron")
    compiled(x)  # compile outside the trace
    torch.neuron.synchronize()
    records = []
    handle = global_sink().subscribe(records.append)
    try:
        y = compiled(x)
        torch.neuron.synchronize()
    finally:
        global_sink().unsubscribe(handle)
    launches = [r for r in records if r.kind == "neff"]
    names = [r.name for r in launches]
    assert len(names) == 3 and names[1] == "sin_kernel", names
    assert launches[0].end_ns <= launches[1].start_ns <= launches[1].end_ns <= launches[2].start_ns
    assert launches[1].end_ns - launches[1].start_ns == pytest.approx(sin_kernel.last_device_time_ns)
    torch.testing.assert_close(y.cpu(), torch.sin(x.cpu() + 1) * 3, rtol=1e-5, atol=1e-5)


def test_a_graph_of_only_a_kernel_and_a_non_contiguous_input(neuron, strict):
    base = torch.randn(40, 128)
    x = base.to(neuron).t()  # [128, 40], not contiguous
    y = torch.compile(lambda t: pt_nki_sin(t), backend="neuron")(x)
    torch.testing.assert_close(y.cpu(), torch.sin(base.t()), rtol=1e-5, atol=1e-5)


def test_kernel_op_with_several_results_and_one_that_writes_an_argument(neuron, strict):
    def f(x):
        s, c = sin_and_cos(x)
        out = torch.zeros_like(x)
        sin_into(c, out)  # functionalized: the graph calls it through auto_functionalized
        return s * c + out

    x_cpu = torch.randn(128, 5)
    y = torch.compile(f, backend="neuron")(x_cpu.to(neuron))
    s, c = torch.sin(x_cpu), torch.cos(x_cpu)
    torch.testing.assert_close(y.cpu(), s * c + torch.sin(c), rtol=1e-5, atol=1e-5)


class _KernelMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 4)

    def forward(self, x):  # x: [128, 16]
        return self.down(pt_nki_sin(self.up(x)))


def test_training_a_model_that_calls_a_kernel_matches_its_cpu_reference(neuron, strict):
    torch.manual_seed(0)
    model_cpu = _KernelMLP()
    model = _KernelMLP().to(neuron)
    model.load_state_dict(model_cpu.state_dict())
    x_cpu, target_cpu = torch.randn(128, 16), torch.randn(128, 4)

    def reference(x):  # the same model with torch.sin in place of the kernel
        return model_cpu.down(torch.sin(model_cpu.up(x)))

    compiled = torch.compile(model, backend="neuron")
    for _ in range(2):
        loss = torch.nn.functional.mse_loss(compiled(x_cpu.to(neuron)), target_cpu.to(neuron))
        loss.backward()
        ref = torch.nn.functional.mse_loss(reference(x_cpu), target_cpu)
        ref.backward()
        torch.testing.assert_close(loss.detach().cpu(), ref.detach(), rtol=1e-5, atol=1e-5)
        for (name, p), p_cpu in zip(model.named_parameters(), model_cpu.parameters()):
            torch.testing.assert_close(p.grad.cpu(), p_cpu.grad, rtol=1e-4, atol=1e-5, msg=name)
        with torch.no_grad():
            for p, p_cpu in zip(model.parameters(), model_cpu.parameters()):
                p -= 0.1 * p.grad
                p_cpu -= 0.1 * p_cpu.grad
                p.grad, p_cpu.grad = None, None


def test_an_aten_segment_that_cannot_compile_falls_back_alone(neuron):
    """options={"fallback": "eager"}: the segment that fails runs op by op, the kernel still runs."""
    def f(x):
        y = pt_nki_sin(x * 2.0)
        return torch.lgamma(y + x)  # no compiled lowering: that segment runs eagerly

    x_cpu = torch.randn(128, 3)
    with pytest.warns(NeuronCompileFallbackWarning, match="_1 runs eagerly"):
        y = torch.compile(f, backend="neuron", options={"fallback": "eager"})(x_cpu.to(neuron))
    torch.testing.assert_close(y.cpu(), torch.lgamma(torch.sin(x_cpu * 2) + x_cpu), rtol=1e-5, atol=1e-5)
