"""torch.save / torch.load (with map_location), pickle and deepcopy of neuron tensors and modules."""

from __future__ import annotations

import copy
import io
import pickle

import torch
from tnx_helpers import assert_equal


def _roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


def test_save_load_keeps_the_device():
    t = torch.arange(10.0, device="neuron")
    loaded = _roundtrip(t)
    assert loaded.device == torch.device("neuron", 0)
    assert_equal(loaded, torch.arange(10.0))


def test_map_location():
    t = torch.arange(6, dtype=torch.int32, device="neuron").reshape(2, 3)
    cpu = _roundtrip(t, map_location="cpu")
    assert cpu.device.type == "cpu"
    assert_equal(cpu, torch.arange(6, dtype=torch.int32).reshape(2, 3))
    back = _roundtrip(torch.ones(3), map_location="neuron")
    assert back.device.type == "neuron"
    assert _roundtrip(t, map_location=torch.device("neuron", 0)).device.type == "neuron"
    assert _roundtrip(t, map_location=lambda storage, loc: storage).device.type == "cpu"
    if torch.neuron.device_count() > 1:
        moved = _roundtrip(t, map_location={"neuron:0": "neuron:1"})
        assert moved.device == torch.device("neuron", 1)
        assert_equal(moved, t.cpu())


def test_views_share_storage_after_load():
    base = torch.arange(12.0, device="neuron")
    a, b = _roundtrip((base, base[3:7]))
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    a.add_(1)
    assert_equal(b, torch.arange(3.0, 7.0) + 1)


def test_state_dict_round_trip():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)).to("neuron")
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(3, 4, device="neuron")).sum().backward()
    opt.step()
    state = _roundtrip({"model": model.state_dict(), "opt": opt.state_dict()})
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)).to("neuron")
    fresh.load_state_dict(state["model"])
    for p, q in zip(fresh.state_dict().values(), model.state_dict().values()):
        assert_equal(p, q.cpu())
    opt2 = torch.optim.AdamW(fresh.parameters())
    opt2.load_state_dict(state["opt"])
    assert opt2.state_dict()["state"][0]["exp_avg"].device.type == "neuron"
    cpu_state = _roundtrip(model.state_dict(), map_location="cpu")
    assert all(v.device.type == "cpu" for v in cpu_state.values())


def test_pickle_and_deepcopy():
    t = torch.randn(5, 3, device="neuron").to(torch.bfloat16)
    p = pickle.loads(pickle.dumps(t))
    assert p.device.type == "neuron" and p.dtype == torch.bfloat16
    assert_equal(p, t.cpu())
    param = torch.nn.Parameter(torch.ones(2, device="neuron"))
    c = copy.deepcopy(param)
    assert isinstance(c, torch.nn.Parameter) and c.device.type == "neuron" and c.data_ptr() != param.data_ptr()
    m = copy.deepcopy(torch.nn.Linear(3, 3).to("neuron"))
    assert m.weight.device.type == "neuron"
