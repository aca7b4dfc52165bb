"""Many threads using the device at once get exactly what each would get alone.

8 threads issue mixed programs - compiled elementwise and matmul ops, in-place updates, reductions,
a CPU-fallback op, host copies, ``.item()`` - on the shared default stream, with adaptive eager on
and off; every result is checked against CPU. The threads start together at a barrier and the
whole run is bounded in time (a deadlock fails the test instead of hanging it).
"""

from __future__ import annotations

import threading

import pytest
import torch
import torch_neuronx
from tnx_helpers import TOLERANCES

THREADS = 8
ITERATIONS = 12
TIME_LIMIT_S = 240


def program(a: torch.Tensor, b: torch.Tensor, scale: float) -> list[torch.Tensor]:
    c = a * b + a
    d = (c @ b.T).softmax(-1)  # matmul, then a reduction-based op
    c.add_(scale)  # in place, after c was read
    e = torch.cat([c, a], 0).relu()
    f = torch.cumsum(e, 0).flip(0)  # movement ops
    g = torch.erfinv(torch.sort(d, dim=-1).values * 1.8 - 0.9)  # sorted on device; erfinv: CPU fallback
    h = e.t().contiguous() * (d.sum() / 7)  # a non-contiguous operand, a reduction feeding an op
    return [c, d, e, f, g, h, torch.stack([e.mean(), h.amax()])]


def run_threads(adaptive: bool) -> list[str]:
    failures: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def worker(k: int) -> None:
        try:
            gen = torch.Generator().manual_seed(1000 + k)
            barrier.wait()
            for i in range(ITERATIONS):
                rows = 3 + (k + i) % 5  # several signatures at once
                a, b = torch.randn(rows, 7, generator=gen), torch.randn(rows, 7, generator=gen)
                scale = float(i % 3) + 0.5
                expected = program(a.clone(), b.clone(), scale)
                got = program(a.to("neuron"), b.to("neuron"), scale)
                checks = [x.cpu() for x in got] + [torch.tensor(got[-1][0].item())]
                expected = expected + [expected[-1][0]]
                for j, (x, y) in enumerate(zip(checks, expected)):
                    if not torch.allclose(x, y, equal_nan=False, **TOLERANCES[torch.float32]):
                        failures.append(f"thread {k} iteration {i} result {j}: max error {(x - y).abs().max().item()}")
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            errors.append(err)
            barrier.abort()

    torch_neuronx.set_adaptive_eager(adaptive)
    try:
        warm = program(torch.randn(3, 7).to("neuron"), torch.randn(3, 7).to("neuron"), 0.5)  # compile a first signature
        torch.neuron.synchronize()
        del warm
        threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIME_LIMIT_S)
        assert not any(t.is_alive() for t in threads), f"threads still running after {TIME_LIMIT_S} s (deadlock?)"
    finally:
        torch_neuronx.set_adaptive_eager(None)
    if errors:
        raise errors[0]
    return failures


@pytest.mark.parametrize("adaptive", [False, True], ids=["plain_eager", "adaptive_eager"])
def test_eight_threads_of_mixed_ops_match_cpu(adaptive):
    failures = run_threads(adaptive)
    assert not failures, f"{len(failures)} of {THREADS * ITERATIONS * 8} results differ from CPU:\n" + "\n".join(failures[:20])
