"""nki.benchmark: run a kernel ``warmup + iters`` times and report the device latency.

Every iteration is a launch on the runtime device, as a numpy call is (``nki.launch``): the
arguments are copied to device memory once per call and again before each iteration, so every
iteration computes from the caller's values and the call returns what one call of the kernel
would. Latency is the simulated device time of each timed iteration (microseconds); the timing
model is deterministic, so the percentiles of a kernel with static loops agree.
``save_neff_name`` writes the kernel's NEFF (``nki.artifacts.save_neffs``), ``save_trace_name``
a Chrome/Perfetto trace of the timed iterations' launches (``nki.artifacts.write_trace``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from . import arrays
from .artifacts import save_neffs, write_trace
from .errors import NkiError
from .kernel import Kernel, jit
from .launch import DeviceCall, check_arguments


@dataclass(frozen=True)
class Latency:
    """``nc_latency`` of a benchmark result: one sample per timed iteration, in microseconds of
    simulated device time."""

    samples_us: tuple[float, ...]

    def get_latency_percentile(self, percentile: int) -> float:
        if not 0 <= percentile <= 100:
            raise ValueError(f"percentile must be in [0, 100], got {percentile}")
        return float(np.percentile(self.samples_us, percentile))


@dataclass(frozen=True)
class BenchmarkResult:
    nc_latency: Latency
    timing_summary: dict  # Neuron Explorer style summary of the last iteration (engine busy %, MFU, HBM bytes, ...)
    warmup: int
    iters: int
    neff_paths: tuple[str, ...] = ()  # written when save_neff_name was given
    trace_path: str | None = None  # written when save_trace_name was given


class BenchmarkedKernel(Kernel):
    def __init__(self, func, grid=(1,), cache=None, layout=(), *, warmup: int = 10, iters: int = 100, save_neff_name=None,
                 save_trace_name=None, execution_traces=None, execution_reports=None, **options):
        super().__init__(func, grid, cache, layout, **options)
        for name, value, least in (("warmup", warmup, 0), ("iters", iters, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"nki.benchmark {name} must be an int >= {least}, got {value!r}")
        # execution_traces / execution_reports: {timed iteration (from 1): path} - the trace, and the
        # timing summary as JSON, of single iterations (nki.profile's num_execs / profile_nth).
        self.settings = {"warmup": warmup, "iters": iters, "save_neff_name": save_neff_name,
                         "save_trace_name": save_trace_name, "execution_traces": dict(execution_traces or {}),
                         "execution_reports": dict(execution_reports or {})}

    def __getitem__(self, grid) -> BenchmarkedKernel:
        launch = super().__getitem__(grid)
        launch.settings = self.settings
        return launch

    def __call__(self, *args, **kwargs):
        if arrays.launcher(args, kwargs) is not None:
            raise NkiError("nki.benchmark runs kernels on numpy arrays (as in the Neuron SDK); pass numpy arrays")
        check_arguments(args, kwargs)
        warmup, iters = self.settings["warmup"], self.settings["iters"]
        compiled = self.compile(args, kwargs)
        records = []
        with DeviceCall(self, compiled, args, kwargs) as call:
            trace = call.queue.device.trace
            handle = trace.subscribe(records.append) if self.settings["save_trace_name"] or \
                self.settings["execution_traces"] else None
            try:
                for _ in range(warmup):
                    call.launch()
                timed = [call.launch() for _ in range(iters)]
            finally:
                if handle is not None:
                    trace.unsubscribe(handle)
            result = call.results()
        last = timed[-1].timings
        neffs = ()
        if self.settings["save_neff_name"]:
            neffs = tuple(save_neffs(compiled, self.settings["save_neff_name"], last, self.__name__))
        trace_path = None
        if self.settings["save_trace_name"]:
            by_id = {s.launch_id: s for s in timed}
            trace_path = os.fspath(self.settings["save_trace_name"])
            write_trace(trace_path, [r for r in records if r.launch_id in by_id], lambda r: by_id[r.launch_id].timings,
                        self.__name__, compiled.arch.name)
        for n, path in self.settings["execution_traces"].items():
            one = timed[n - 1]
            write_trace(os.fspath(path), [r for r in records if r.launch_id == one.launch_id], lambda r, one=one: one.timings,
                        self.__name__, compiled.arch.name)
        for n, path in self.settings["execution_reports"].items():
            core = [t.summary for t in timed[n - 1].timings]
            with open(path, "w") as f:
                json.dump(core[0] if len(core) == 1 else {"cores": core}, f, indent=1, default=float)
        summaries = [t.summary for t in last]
        self.record(benchmark_result=BenchmarkResult(
            Latency(tuple(s.device_time_ns / 1e3 for s in timed)),
            summaries[0] if len(summaries) == 1 else {"cores": summaries},
            warmup, iters, neffs, trace_path,
        ))
        return result


def benchmark(kernel=None, warmup: int = 10, iters: int = 100, save_neff_name=None, save_trace_name=None,
              additional_compile_opt=None):
    """Decorator (or call) that benchmarks ``kernel`` on every call and records
    ``kernel.benchmark_result``. ``additional_compile_opt`` (neuronx-cc flags) has no effect here:
    kernels are traced, not compiled by neuronx-cc."""

    def wrap(fn):
        base = fn if isinstance(fn, Kernel) else jit(fn)
        return BenchmarkedKernel(base.func, base.grid, base._cache, base.layout, warmup=warmup, iters=iters,
                                 save_neff_name=save_neff_name, save_trace_name=save_trace_name, **base.options)

    return wrap if kernel is None else wrap(kernel)


def profile(func=None, working_directory=None, save_neff_name="file.neff", save_trace_name="profile.ntff",
            additional_compile_opt=None, overwrite: bool = False, profile_nth: int = 1, num_execs: int | None = None):
    """Legacy ``nki.profile``: run the kernel ``profile_nth`` times and save, in
    ``working_directory`` (absolute, as the SDK requires), the NEFF of the profiled execution, its
    trace (Chrome trace-event JSON, whatever the file's extension) and ``profile_summary.json``
    (the timing summary: engine busy time, MFU, DMA bytes, ...). Existing files are kept unless
    ``overwrite``. As in the SDK the call returns None: a profile is not a result.

    With ``num_execs`` the kernel runs ``max(num_execs, profile_nth)`` times and every
    ``profile_nth``-th execution ``n`` is profiled: its trace goes to ``<trace stem>_exec_<n><ext>``
    (execution 1 to the name itself) and its summary to ``json_reports/profile_exec_<n>.json``."""
    if not working_directory or not os.path.isabs(working_directory):
        raise NkiError(f"nki.profile needs an absolute working_directory, got {working_directory!r}")
    for name, value in (("profile_nth", profile_nth), ("num_execs", 1 if num_execs is None else num_execs)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"nki.profile {name} must be an int >= 1, got {value!r}")
    os.makedirs(working_directory, exist_ok=True)
    neff, trace = (os.path.join(working_directory, n) for n in (save_neff_name, save_trace_name))
    summary_path = os.path.join(working_directory, PROFILE_SUMMARY)
    traces, reports = {}, {}
    if num_execs is not None:
        stem, ext = os.path.splitext(trace)
        reports_dir = os.path.join(working_directory, JSON_REPORTS)
        executions = max(num_execs, profile_nth)
        for n in range(profile_nth, executions + 1, profile_nth):
            traces[n] = trace if n == 1 else f"{stem}_exec_{n}{ext}"
            reports[n] = os.path.join(reports_dir, f"profile_exec_{n}.json")

    def wrap(fn):
        if num_execs is None:
            benchmarked = benchmark(fn, warmup=profile_nth - 1, iters=1, save_neff_name=neff, save_trace_name=trace)
        else:
            base = fn if isinstance(fn, Kernel) else jit(fn)
            benchmarked = BenchmarkedKernel(base.func, base.grid, base._cache, base.layout, warmup=0, iters=executions,
                                            save_neff_name=neff, execution_traces=traces, execution_reports=reports,
                                            **base.options)

        def run(*args, **kwargs):
            os.makedirs(os.path.join(working_directory, JSON_REPORTS) if reports else working_directory, exist_ok=True)
            existing = [p for p in (neff, trace, summary_path, *traces.values(), *reports.values()) if os.path.exists(p)]
            if existing and not overwrite:
                raise NkiError(f"nki.profile would overwrite {existing}; pass overwrite=True or remove them")
            benchmarked(*args, **kwargs)
            with open(summary_path, "w") as f:
                json.dump(benchmarked.benchmark_result.timing_summary, f, indent=1, default=float)

        run.kernel = benchmarked
        return run

    return wrap if func is None else wrap(func)


PROFILE_SUMMARY = "profile_summary.json"
JSON_REPORTS = "json_reports"
