"""torch.profiler on the neuron device, and Neuron Explorer captures of the profiled steps.

    from torch.profiler import profile, ProfilerActivity
    from torch_neuronx.profiling import NeuronConfig, ProfileMode, NeuronProfiler

    config = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME], profile_output_dir="./output")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=config,
                 on_trace_ready=NeuronProfiler(config).export_trace) as prof:
        ...                                     # work on the neuron device
    prof.key_averages().table(sort_by="self_privateuse1_time_total")   # simulated device time per op
    config.get_session_dir()                    # the Neuron Explorer session: neuron-explorer view -d DIR

Listing ``ProfilerActivity.PrivateUse1`` turns on the shim's Kineto activity profiler
(``csrc/profiler/``): every launch and device copy in the profiled steps becomes a device event
linked to the op that issued it. ``NeuronConfig`` adds the Neuron Explorer capture of the same
steps (device and runtime traces, NEFFs) and ``NeuronProfiler.export_trace`` puts the framework
``trace.json`` beside it.
"""

from .config import NeuronConfig, ProfileMode
from .profiler import NeuronProfiler

__all__ = ["NeuronConfig", "ProfileMode", "NeuronProfiler"]
