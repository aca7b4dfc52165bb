"""Several devices from NEURON_RT_VISIBLE_CORES (fresh interpreters: the runtime reads it once)."""

from __future__ import annotations

from tnx_helpers import run_python


def test_visible_cores_range_gives_two_devices():
    proc = run_python(
        """
        import torch, torch_neuronx
        from torch_neuronx import execution
        rt = execution.runtime()
        assert torch.neuron.device_count() == 2 == torch.accelerator.device_count()
        assert [d.core_id for d in rt.devices] == [0, 1]
        hbm0, hbm1 = rt.device(0).hbm.allocated, rt.device(1).hbm.allocated
        a = torch.arange(1024, dtype=torch.float32, device="neuron:1")
        assert a.device == torch.device("neuron", 1)
        # The allocation is device 1's HBM (and statistics), not device 0's.
        assert rt.device(1).hbm.allocated >= hbm1 + a.nbytes
        assert rt.device(0).hbm.allocated == hbm0
        assert torch.neuron.memory_allocated(1) >= a.nbytes
        assert torch.neuron.memory_allocated(0) == 0
        block, _ = rt.device(1).hbm.resolve(a.data_ptr(), a.nbytes)
        # Work on neuron:1 lands on device 1's timeline.
        t0 = rt.device(1).sim_time_ns
        b = (a * 2).sum()
        assert rt.device(1).sim_time_ns > t0 and rt.device(0).sim_time_ns == 0
        assert b.item() == 2 * sum(range(1024))
        # Copies between devices, both ways, and through the current device.
        c = a.to("neuron:0")
        assert c.device.index == 0 and torch.equal(c.cpu(), a.cpu())
        d = c.add(1).to("neuron:1", non_blocking=True)
        torch.neuron.synchronize()
        assert torch.equal(d.cpu(), a.cpu() + 1)
        with torch.neuron.device(1):
            e = torch.zeros(3, device="neuron")
        assert e.device.index == 1
        # Mixing devices in one op is refused with the usual message.
        try:
            a + c
        except RuntimeError as err:
            assert "neuron:1 and neuron:0" in str(err) or "neuron:0 and neuron:1" in str(err), err
        else:
            raise AssertionError("mixing devices was accepted")
        try:
            torch.ones(1, device="neuron:2")
        except IndexError as err:
            assert "invalid neuron device index 2" in str(err) and "2 device(s)" in str(err), err
        else:
            raise AssertionError("neuron:2 accepted")
        print("ok")
        """,
        env={"NEURON_RT_VISIBLE_CORES": "0-1"},
    )
    assert proc.stdout.strip().endswith("ok")


def test_visible_cores_list_and_properties():
    proc = run_python(
        """
        import torch
        print(torch.neuron.device_count(), torch.neuron.get_device_properties(0).core_id,
              torch.neuron.get_device_properties(1).core_id)
        """,
        env={"NEURON_RT_VISIBLE_CORES": "3,5"},
    )
    assert proc.stdout.split() == ["2", "3", "5"]


def test_modules_and_autograd_on_second_device():
    proc = run_python(
        """
        import torch
        torch.manual_seed(0)
        m = torch.nn.Linear(8, 4)
        ref = torch.nn.Linear(8, 4); ref.load_state_dict(m.state_dict())
        m.to("neuron:1")
        x = torch.randn(5, 8)
        m(x.to("neuron:1")).sum().backward()
        ref(x).sum().backward()
        assert m.weight.grad.device == torch.device("neuron", 1)
        assert torch.equal(m.weight.grad.cpu(), ref.weight.grad)
        print("ok")
        """,
        env={"NEURON_RT_VISIBLE_CORES": "0-1"},
    )
    assert proc.stdout.strip() == "ok"
