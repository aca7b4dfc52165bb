"""``torch._foreach_*`` ops and the ``foreach=True`` optimizers on neuron: one launch per call over
the whole list, CPU's values, and no recompile when the step's scalars change."""

from __future__ import annotations

import pytest
import torch
import torch_neuronx
from tnx_helpers import op_records

SHAPES = [(3, 4), (5,), (128, 130), (1, 1, 7), ()]


@pytest.fixture(autouse=True)
def _each_op_launched_on_its_own(monkeypatch):
    """These tests count the multi-tensor kernels' own launches: optimizer steps are not fused
    into adaptive-eager runs here (tests/compiled/test_tnx_optimizer_step.py covers that)."""
    monkeypatch.setenv("TORCH_NEURONX_FUSE_OPTIMIZER_STEP", "0")


def _lists(count=2, seed=0, shapes=SHAPES):
    g = torch.Generator().manual_seed(seed)
    return [[torch.randn(s, generator=g) + (2.0 if i else 0.0) for s in shapes] for i in range(count)]


def _neuron(tensors):
    return [t.to("neuron") for t in tensors]


def _launches(records):
    return [r for r in records if r.task_kind == "neff"]


CALLS = {
    "mul_scalar": lambda a, b: torch._foreach_mul(a, 0.37),
    "add_list_alpha": lambda a, b: torch._foreach_add(a, b, alpha=-1.5),
    "div_scalar_list": lambda a, b: torch._foreach_div(a, [0.5 + i for i in range(len(a))]),
    "sub_scalar": lambda a, b: torch._foreach_sub(a, 3.0),
    "lerp_scalar": lambda a, b: torch._foreach_lerp(a, b, 0.1),
    "addcmul_scalar": lambda a, b: torch._foreach_addcmul(a, b, b, value=0.001),
    # an int value stays a compile-time constant and reached addcmul as a 4th positional argument
    # (RMSprop's centered step: _foreach_addcmul(avgs, grad_avgs, grad_avgs, value=-1))
    "addcmul_int_value": lambda a, b: torch._foreach_addcmul(a, b, b, value=-1),
    "addcdiv_scalar_list": lambda a, b: torch._foreach_addcdiv(a, b, b, [-0.01 * (i + 1) for i in range(len(a))]),
    "addcdiv_tensor": lambda a, b: torch._foreach_addcdiv(a, a, b, torch.arange(len(a), dtype=torch.float32)),
    "sqrt": lambda a, b: torch._foreach_sqrt(b),
    "maximum_list": lambda a, b: torch._foreach_maximum(a, b),
    "norm": lambda a, b: torch._foreach_norm(a),
    "exp": lambda a, b: torch._foreach_exp(a),
    "pow_scalar_and_tensor": lambda a, b: torch._foreach_pow(2.0, a),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_a_foreach_op_is_one_launch_with_cpus_values(name):
    a, b = _lists()
    expected = CALLS[name](a, b)
    na, nb = _neuron(a), _neuron(b)
    with op_records() as records:
        got = CALLS[name](na, nb)
        torch.neuron.synchronize()
    assert len(_launches(records)) == 1, [r.name for r in records]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.device.type == "neuron" and g.shape == e.shape and g.dtype == e.dtype
        torch.testing.assert_close(g.cpu(), e, rtol=2e-6, atol=1e-6, equal_nan=True)


def test_in_place_forms_write_every_tensor_including_views():
    a, b = _lists(seed=3)
    base = torch.randn(6, 8)
    a.append(base.t()[1:5])  # a non-contiguous view of a larger tensor
    b.append(torch.randn(4, 6))
    na, nb = _neuron(a[:-1]), _neuron(b)
    nbase = base.to("neuron")
    na.append(nbase.t()[1:5])
    torch._foreach_mul_(a, 1.25)
    torch._foreach_addcdiv_(a, b, [t.abs() + 1 for t in b], value=-0.5)
    torch._foreach_mul_(na, 1.25)
    torch._foreach_addcdiv_(na, nb, [t.abs() + 1 for t in nb], value=-0.5)
    for g, e in zip(na, a):
        torch.testing.assert_close(g.cpu(), e, rtol=2e-6, atol=1e-6, equal_nan=True)
    torch.testing.assert_close(nbase.cpu(), base, rtol=2e-6, atol=1e-6)  # the rest of the base is untouched


OPTIMIZERS = {
    "AdamW": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, foreach=True),
    "Adam_amsgrad": lambda ps: torch.optim.Adam(ps, lr=1e-2, amsgrad=True, foreach=True),
    "SGD_momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3, foreach=True),
    "Adagrad": lambda ps: torch.optim.Adagrad(ps, lr=0.1, foreach=True),
    "RMSprop": lambda ps: torch.optim.RMSprop(ps, lr=1e-2, momentum=0.5, foreach=True),
    "RMSprop_centered": lambda ps: torch.optim.RMSprop(ps, lr=1e-2, centered=True, foreach=True),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_foreach_optimizers_match_cpu_with_a_scheduled_learning_rate(name):
    (init,) = _lists(count=1, seed=7, shapes=[(64, 33), (33,), (2, 3, 5), (1,)])
    grads = [_lists(count=1, seed=100 + s, shapes=[tuple(t.shape) for t in init])[0] for s in range(5)]
    runs = {}
    for device in ("cpu", "neuron"):
        params = [t.clone().to(device).requires_grad_() for t in init]
        opt = OPTIMIZERS[name](params)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.9 ** step)
        launches = []
        for g in grads:
            for p, gi in zip(params, g):
                p.grad = gi.to(device, copy=True)
            with op_records() as records:
                opt.step()
                torch.neuron.synchronize()
            sched.step()
            launches.append(len(_launches(records)))
        runs[device] = ([p.detach().cpu() for p in params], launches)
    for got, expected in zip(runs["neuron"][0], runs["cpu"][0]):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    launches = runs["neuron"][1][1:]  # the first step also makes the optimizer's state
    assert max(launches) <= 16, launches  # a few foreach calls per step, not a few per parameter
    assert torch_neuronx.get_fallback_ops() == [] or all("foreach" not in op for op in torch_neuronx.get_fallback_ops())


def test_a_new_learning_rate_every_step_compiles_nothing_new():
    """The learning rate and Adam's bias corrections are runtime inputs, not compiled-in numbers."""
    from torch_neuronx.compiled.dispatch import CACHE

    (init,) = _lists(count=1, seed=9, shapes=[(16, 16), (16,)])
    params = [t.to("neuron").requires_grad_() for t in init]
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=True)
    entries = []
    for step in range(5):
        for p in params:
            p.grad = torch.full(p.shape, 0.5 + step).to("neuron")  # a new value, made on the host
        opt.param_groups[0]["lr"] = 1e-3 * (step + 1)
        opt.step()
        torch.neuron.synchronize()
        entries.append(len(CACHE))
    assert entries[1:] == [entries[1]] * 4, entries


FUSED = {
    "AdamW": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, fused=True),
    "Adam_amsgrad_maximize_l2": lambda ps: torch.optim.Adam(ps, lr=1e-2, amsgrad=True, maximize=True,
                                                            weight_decay=0.01, fused=True),
    "SGD_nesterov": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3, fused=True),
    "SGD": lambda ps: torch.optim.SGD(ps, lr=0.1, fused=True),
    "Adagrad": lambda ps: torch.optim.Adagrad(ps, lr=0.1, lr_decay=0.01, weight_decay=0.01, fused=True),
}
FUSED_SHAPES = [(64, 33), (33,), (2, 3, 5), (1,)]


def _fused_steps(device, make, grads, scaler=None, lr_tensor=False):
    """Params after ``len(grads)`` steps of ``make(params)`` under a LambdaLR, and the fused
    optimizer launches of each step."""
    (init,) = _lists(count=1, seed=7, shapes=FUSED_SHAPES)
    params = [t.clone().to(device).requires_grad_() for t in init]
    opt = make(params)
    if lr_tensor:
        for group in opt.param_groups:
            group["lr"] = torch.tensor(group["lr"])  # a tensor learning rate on the host, as torch allows
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.9 ** step)
    launches = []
    for g in grads:
        for p, gi in zip(params, g):
            p.grad = gi.to(device, copy=True)  # a fused step with a grad scale writes it
        with op_records() as records:
            if scaler is None:
                opt.step()
            else:
                scaler.scale(params[0].sum())  # what scaler.scale(loss) does first: make its scale
                scaler.step(opt)
                scaler.update()
            torch.neuron.synchronize()
        sched.step()
        launches.append([r.name for r in _launches(records) if "_fused_" in r.name])
    return [p.detach().cpu() for p in params], [p.grad.cpu() for p in params], launches


def _grads(steps=4):
    return [_lists(count=1, seed=100 + s, shapes=FUSED_SHAPES)[0] for s in range(steps)]


@pytest.mark.parametrize("name", list(FUSED))
def test_fused_optimizers_are_one_launch_per_step_with_cpus_values(name):
    grads = _grads()
    expected, _, _ = _fused_steps("cpu", FUSED[name], grads)
    got, _, launches = _fused_steps("neuron", FUSED[name], grads)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)
    assert all(len(step) == 1 for step in launches), launches  # the whole parameter group in one NEFF
    assert not [op for op in torch_neuronx.get_fallback_ops() if "_fused_" in op]


def test_a_tensor_learning_rate_runs_the_tensor_lr_overload():
    grads = _grads(3)
    make = FUSED["AdamW"]
    expected, _, _ = _fused_steps("cpu", make, grads, lr_tensor=True)
    got, _, launches = _fused_steps("neuron", make, grads, lr_tensor=True)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)
    assert all(len(step) == 1 for step in launches), launches


@pytest.mark.parametrize("name", ["AdamW", "SGD_nesterov", "Adagrad"])
def test_grad_scaler_unscales_in_the_fused_step_and_skips_a_step_with_an_inf(name):
    grads = [[g * 1024.0 for g in step] for step in _grads(3)]
    grads[1][2] = grads[1][2].clone()
    grads[1][2].view(-1)[3] = float("inf")  # GradScaler skips this step and halves its scale
    results = {}
    for device in ("cpu", "neuron"):
        scaler = torch.amp.GradScaler(device, init_scale=1024.0, growth_interval=1)
        results[device] = _fused_steps(device, FUSED[name], grads, scaler=scaler)
    (params, grads_after, launches), (cpu_params, cpu_grads, _) = results["neuron"], results["cpu"]
    for g, e in zip(params, cpu_params):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)
    for g, e in zip(grads_after, cpu_grads):  # the fused step writes the unscaled gradients back
        torch.testing.assert_close(g, e, rtol=1e-6, atol=0, equal_nan=True)
    assert all(len(step) == 1 for step in launches), launches


def test_a_fused_step_compiles_once_while_the_learning_rate_changes():
    from torch_neuronx.compiled.dispatch import CACHE

    grads = _grads(5)
    _fused_steps("neuron", FUSED["AdamW"], grads[:1])
    before = len(CACHE)
    _fused_steps("neuron", FUSED["AdamW"], grads)  # LambdaLR: a new learning rate every step
    assert len(CACHE) == before


def _amp_training(device, inf_step=1, steps=3):
    """A Linear trained under GradScaler with a default (foreach) AdamW and clip_grad_norm_; one
    step's loss is inf. Returns params, scales and the fallback ops used."""
    torch.manual_seed(0)
    model = torch.nn.Linear(7, 5).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 10, growth_interval=1)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(4, 7, generator=g) for _ in range(steps)]
    scales, norms = [], []
    for k, x in enumerate(xs):
        opt.zero_grad()
        loss = model(x.to(device)).square().mean() * (float("inf") if k == inf_step else 1.0)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5).cpu())
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return [p.detach().cpu() for p in model.parameters()], scales, norms


def test_grad_scaler_and_clip_grad_norm_run_on_the_device_with_cpus_values():
    torch_neuronx.clear_op_tracking()
    expected, cpu_scales, cpu_norms = _amp_training("cpu")
    got, scales, norms = _amp_training("neuron")
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)
    assert scales == cpu_scales  # halved after the inf step, grown after each good one
    for g, e in zip(norms, cpu_norms):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6, equal_nan=True)
    used = torch_neuronx.get_fallback_ops()
    assert not [op for op in used if "_amp_" in op or "foreach" in op], used


@pytest.mark.parametrize("kwargs", [{}, {"fused": True}, {"foreach": False}])
def test_parameters_on_cpu_and_neuron_in_one_group_step_per_device_as_torch_groups_them(kwargs):
    """PyTorch groups an optimizer's tensors by device (as with CPU and CUDA parameters in one
    group): each device's share steps with its own kernels, with CPU's values."""
    init = [torch.randn(4, 3), torch.randn(5)]
    grads = [torch.randn(4, 3), torch.randn(5)]
    expected = [t.clone().requires_grad_() for t in init]
    mixed = [init[0].clone().requires_grad_(), init[1].clone().to("neuron").requires_grad_()]
    for params in (expected, mixed):
        for p, g in zip(params, grads):
            p.grad = g.to(p.device)
        opt = torch.optim.AdamW(params, lr=0.1, **kwargs)
        opt.step()
        opt.step()
    for got, want in zip(mixed, expected):
        assert got.device.type in ("cpu", "neuron")
        torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-6)
