"""Device memory is host memory: native code reading a neuron tensor's data_ptr() reads its
values (after synchronize), and nothing that touches raw storage crashes the process."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest
import torch
from tnx_helpers import run_python

C_SOURCE = r"""
#include <stdint.h>
double sum_f32(const float* p, int64_t n) { double s = 0; for (int64_t i = 0; i < n; ++i) s += p[i]; return s; }
int64_t sum_i64_strided(const int64_t* p, int64_t n, int64_t stride) {
    int64_t s = 0; for (int64_t i = 0; i < n; ++i) s += p[i * stride]; return s;
}
void fill_f32(float* p, int64_t n, float v) { for (int64_t i = 0; i < n; ++i) p[i] = v; }
"""


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    folder = tmp_path_factory.mktemp("native")
    src, lib = folder / "tnx_native.c", folder / "libtnx_native.so"
    src.write_text(C_SOURCE)
    subprocess.run([cc, "-O1", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    so = ctypes.CDLL(str(lib))
    so.sum_f32.restype = ctypes.c_double
    so.sum_f32.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    so.sum_i64_strided.restype = ctypes.c_int64
    so.sum_i64_strided.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    so.fill_f32.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_float]
    return so


def test_ctypes_reads_the_tensor_bytes():
    t = torch.randn(37, 5, device="neuron") * 3  # queued: synchronize before reading
    torch.neuron.synchronize()
    raw = ctypes.string_at(t.data_ptr(), t.nbytes)
    assert raw == t.cpu().numpy().tobytes()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8, torch.int64, torch.bool])
def test_ctypes_reads_every_dtype(dtype):
    cpu = (torch.arange(-20, 20) % 3).to(dtype)
    t = cpu.to("neuron")
    torch.neuron.synchronize()
    assert ctypes.string_at(t.data_ptr(), t.nbytes) == cpu.view(torch.uint8).numpy().tobytes()


def test_views_point_inside_their_storage():
    t = torch.arange(100, dtype=torch.float32, device="neuron")
    v = t[10:20]
    torch.neuron.synchronize()
    assert v.data_ptr() == t.data_ptr() + 40
    assert ctypes.string_at(v.data_ptr(), v.nbytes) == torch.arange(10.0, 20.0).numpy().tobytes()


def test_compiled_c_reads_and_writes_device_memory(native):
    x = torch.linspace(-1, 1, 1001, device="neuron").exp()
    torch.neuron.synchronize()
    assert native.sum_f32(x.data_ptr(), x.numel()) == pytest.approx(x.cpu().double().sum().item(), rel=1e-6)
    m = torch.arange(24, device="neuron").reshape(4, 6)
    col = m[:, 2]
    torch.neuron.synchronize()
    assert native.sum_i64_strided(col.data_ptr(), col.numel(), col.stride(0)) == col.sum().item()
    # C writes are seen by later ops (the device memory is the same bytes).
    y = torch.empty(64, device="neuron")
    native.fill_f32(y.data_ptr(), 64, 1.5)
    assert (y * 2).sum().item() == 192.0


def test_raw_storage_paths_do_not_crash():
    proc = run_python(
        """
        import io, threading, torch
        s = torch.UntypedStorage(16, device="neuron")
        s.fill_(7)
        assert s.cpu().tolist() == [7] * 16
        s.resize_(32)  # storage resize through the hooks (FSDP2's path)
        assert s.nbytes() == 32 and s.cpu().tolist()[:16] == [7] * 16
        t = torch.arange(6.0, device="neuron")
        try:
            t.numpy()
        except TypeError as err:
            print("numpy refused:", "neuron" in str(err))
        buf = io.BytesIO(); torch.save(t, buf); buf.seek(0)
        assert torch.equal(torch.load(buf).cpu(), torch.arange(6.0))
        # Tensors freed while work using them is still queued, from several threads.
        def work():
            for _ in range(20):
                a = torch.randn(128, 128, device="neuron")
                b = (a @ a).relu_()
                del a, b
        threads = [threading.Thread(target=work) for _ in range(3)]
        [th.start() for th in threads]; [th.join() for th in threads]
        torch.neuron.synchronize()
        # Work still queued at exit must not crash the interpreter on the way out.
        x = torch.randn(256, 256, device="neuron")
        for _ in range(10):
            x = x @ x / 16
        print("ok")
        """
    )
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == ["numpy refused: True", "ok"]
