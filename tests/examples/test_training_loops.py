"""The announcement's training loops (announcement examples 1 and 2) as written: eager with
``.to('neuron')`` as the only change, ``torch.accelerator`` device-agnostic code, and the compiled
loop (``set_default_backend`` + ``model.compile()``; ``torch.compile(model, backend="neuron")``)
with the optimizer eager. Each trains a few steps on neuron and the same model on CPU from the same
initial weights; the losses and trained weights must agree. Variants cover the shapes a small test
would miss: a batch of one, feature sizes that are not multiples of 128, non-contiguous batches."""

from __future__ import annotations

import pytest
from examples_harness import run_example

# What the snippets leave to the reader: a model, data, a loss. ``DEVICE`` is where the data lives
# (the snippet itself moves only the model).
PRELUDE = """
import torch

BATCH, FEATURES, NONCONTIGUOUS, MODEL = {batch}, {features}, {noncontiguous}, {model!r}

class MyModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        if MODEL == "mlp":
            self.body = torch.nn.Sequential(torch.nn.Linear(FEATURES, 2 * FEATURES + 1), torch.nn.GELU(),
                                            torch.nn.LayerNorm(2 * FEATURES + 1), torch.nn.Linear(2 * FEATURES + 1, 3))
        else:  # a single Linear: model.compile() of a bare nn.Linear once failed in torch-mlir
            self.body = torch.nn.Linear(FEATURES, 3)

    def forward(self, x):
        return self.body(x)

torch.manual_seed(0)
cpu_batches = [torch.randn(FEATURES, BATCH).t() if NONCONTIGUOUS else torch.randn(BATCH, FEATURES) for _ in range(3)]
cpu_targets = torch.randn(BATCH, 3)
criterion = torch.nn.MSELoss()

def data_on(device):
    batches = [b.to(device) for b in cpu_batches]
    if NONCONTIGUOUS:  # the same non-contiguous layout on the device
        batches = [b.t().contiguous().t() for b in batches]
    return batches, cpu_targets.to(device)

def fresh_model():
    torch.manual_seed(1)  # the initial weights every run starts from
    return MyModel()

def trained_on_cpu():
    model = fresh_model()
    optimizer = torch.optim.AdamW(model.parameters())
    losses = []
    for batch in cpu_batches:
        optimizer.zero_grad()
        loss = criterion(model(batch), cpu_targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, losses

def compare(model, losses):
    model = getattr(model, "_orig_mod", model)  # torch.compile(model) wraps it
    ref, ref_losses = trained_on_cpu()
    weights = {{name: (p.detach().cpu() - ref.state_dict()[name]).abs().max().item()
               for name, p in model.state_dict().items()}}
    report({{"losses": losses, "cpu_losses": ref_losses, "max_weight_error": max(weights.values()),
            "device": str(next(model.parameters()).device)}})
"""

# Announcement example 1, as written, plus the loss it leaves unrecorded.
EAGER_LOOP = """
dataloader, targets = data_on("neuron")
losses = []
torch.manual_seed(1)  # the initial weights of the CPU run
model = MyModel().to('neuron')  # the only change
optimizer = torch.optim.AdamW(model.parameters())
for batch in dataloader:
    optimizer.zero_grad()
    loss = criterion(model(batch), targets)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
compare(model, losses)
"""

# Device-agnostic code: no device name at all.
ACCELERATOR_LOOP = """
assert torch.accelerator.is_available()
device = torch.accelerator.current_accelerator()
dataloader, targets = data_on(device)
losses = []
model = fresh_model().to(device)
optimizer = torch.optim.AdamW(model.parameters())
for batch in dataloader:
    optimizer.zero_grad()
    loss = criterion(model(batch), targets)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
torch.accelerator.synchronize()
assert device.type == "neuron" and torch.accelerator.device_count() >= 1, device
compare(model, losses)
"""

# Announcement example 2, as written.
COMPILED_LOOP = """
torch.compiler.set_default_backend("neuron")  # call once, before any compile
dataloader, targets = data_on("neuron")
losses = []
torch.manual_seed(1)  # the initial weights of the CPU run
model = MyModel().to('neuron')
model.compile()  # no backend argument
optimizer = torch.optim.AdamW(model.parameters())
for batch in dataloader:
    optimizer.zero_grad()
    loss = criterion(model(batch), targets)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
compare(model, losses)
"""

# "or per call: torch.compile(model, backend="neuron")".
COMPILE_CALL_LOOP = COMPILED_LOOP.replace('torch.compiler.set_default_backend("neuron")  # call once, before any compile\n', "").replace(
    "model.compile()  # no backend argument", 'model = torch.compile(model, backend="neuron")')

LOOPS = {"eager": EAGER_LOOP, "accelerator": ACCELERATOR_LOOP, "model.compile": COMPILED_LOOP,
         "torch.compile": COMPILE_CALL_LOOP}
VARIANTS = {  # (batch, features, noncontiguous, model)
    "mlp": (8, 16, False, "mlp"),
    "batch-of-one": (1, 16, False, "mlp"),
    "odd-features": (5, 130, False, "mlp"),
    "noncontiguous": (6, 33, True, "mlp"),
    "single-linear": (4, 8, False, "linear"),
}


def _check(result):
    assert result["device"].startswith("neuron"), result
    for got, expected in zip(result["losses"], result["cpu_losses"], strict=True):
        assert got == pytest.approx(expected, rel=1e-3, abs=1e-5), result
    # AdamW's first steps move each weight by about lr (1e-3): a wrong gradient shows as an error of
    # that size, float32 rounding as far less.
    assert result["max_weight_error"] < 1e-4, result


CASES = [("eager", v) for v in VARIANTS] + [("accelerator", "mlp"), ("accelerator", "noncontiguous")] + [
    ("model.compile", "mlp"), ("model.compile", "noncontiguous"), ("model.compile", "single-linear"),
    ("torch.compile", "batch-of-one"), ("torch.compile", "odd-features")]


@pytest.mark.parametrize("loop, variant", CASES, ids=[f"{loop}-{variant}" for loop, variant in CASES])
def test_the_loop_trains_as_on_cpu(loop, variant):
    batch, features, noncontiguous, model = VARIANTS[variant]
    prelude = PRELUDE.format(batch=batch, features=features, noncontiguous=noncontiguous, model=model)
    _check(run_example(prelude + LOOPS[loop]))
