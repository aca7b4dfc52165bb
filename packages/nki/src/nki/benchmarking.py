"""nki.benchmark: a kernel's device latency, from the simulator's timing model.

The timing model is deterministic (it depends on the instruction stream, not on data), so every
iteration has the same latency and all percentiles are equal; ``warmup`` and ``iters`` are
accepted for compatibility. Latency = simulated device time of the kernel's NEFF, in microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from .kernel import Kernel, jit


@dataclass(frozen=True)
class Latency:
    """``nc_latency`` of a benchmark result (microseconds of simulated device time)."""

    microseconds: float

    def get_latency_percentile(self, percentile: int) -> float:
        if not 0 <= percentile <= 100:
            raise ValueError(f"percentile must be in [0, 100], got {percentile}")
        return self.microseconds


@dataclass(frozen=True)
class BenchmarkResult:
    nc_latency: Latency
    timing_summary: dict  # Neuron Explorer style summary (engine busy %, MFU, HBM bytes, ...)


class BenchmarkedKernel(Kernel):
    def __call__(self, *args, **kwargs):
        result = super().__call__(*args, **kwargs)
        compiled = self.compile(args, kwargs)
        timings = self.last_timing  # this call's timing (loops with run-time bounds vary per call)
        summaries = [t.summary for t in timings]
        summary = summaries[0] if len(summaries) == 1 else {"cores": summaries}
        latency_ns = compiled.latency_ns(timings)
        self.record(benchmark_result=BenchmarkResult(Latency(latency_ns / 1e3), summary))
        return result


def benchmark(kernel=None, warmup: int = 10, iters: int = 100, save_neff_name=None, save_trace_name=None,
              additional_compile_opt=None):
    """Decorator (or call) that records ``kernel.benchmark_result`` on every call."""

    def wrap(fn):
        base = fn if isinstance(fn, Kernel) else jit(fn)
        out = BenchmarkedKernel(base.func, base.grid, base._cache, **base.options)
        return out

    return wrap if kernel is None else wrap(kernel)
