// The PrivateUse1 ProfilerStubs: what torch's profiler asks of a device outside Kineto (the
// legacy path, torch.autograd.profiler.profile(use_device="neuron")), and what it checks before
// letting a profile list ProfilerActivity.PrivateUse1 (enabled() must be true). An event is the
// host time plus the device's simulated clock on the thread's current stream (the time at which
// everything submitted to it so far completes), so elapsed() between an op's start and end is the
// simulated device time of the work the op submitted.
#include <torch/csrc/profiler/stubs/base.h>
#include <torch/extension.h>

#include <c10/util/ApproximateClock.h>

#include <memory>

#include "../runtime/NeuronFunctions.h"

namespace torch_neuronx::profiler {
namespace {

constexpr const char* kLegacy = "torch_neuronx.profiling.legacy";

struct DeviceClockEvent {
  c10::DeviceIndex device;
  double device_ns;
};

struct NeuronProfilerStubs : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    c10::DeviceIndex index = t_device;
    if (device) *device = index;
    if (event) {
      double clock = 0.0;
      {
        py::gil_scoped_acquire gil;
        clock = py::module_::import(kLegacy).attr("device_clock_ns")(static_cast<int>(index)).cast<double>();
      }
      *event = std::make_shared<DeviceClockEvent>(DeviceClockEvent{index, clock});
    }
    if (cpu_ns) *cpu_ns = c10::getTime();
  }

  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    auto a = std::static_pointer_cast<DeviceClockEvent>(*start);
    auto b = std::static_pointer_cast<DeviceClockEvent>(*end);
    TORCH_CHECK(a->device == b->device, "neuron profiler events on different devices (", static_cast<int>(a->device),
                " and ", static_cast<int>(b->device), ") have no elapsed time");
    return static_cast<float>((b->device_ns - a->device_ns) / 1000.0);  // microseconds
  }

  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    for (int d = 0; d < g_device_count; ++d) op(d);
  }

  void synchronize() const override {
    py::gil_scoped_acquire gil;
    py::module_::import(kLegacy).attr("synchronize")();
  }
};

NeuronProfilerStubs stubs;

struct Registration {
  Registration() { torch::profiler::impl::registerPrivateUse1Methods(&stubs); }
} registration;

}  // namespace
}  // namespace torch_neuronx::profiler
