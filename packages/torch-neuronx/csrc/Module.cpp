// torch_neuronx._C: what the Python side calls - init() hands over the bridge, the rest reads or
// sets the thread's current device and stream, and the allocator's counters.
//
// The shim is split by concern as PyTorch's OpenReg backend is: runtime/ holds the allocator
// (device and pinned host memory), hooks, guard, streams, events and generators; aten/ the two
// kernels that must be C++ (empty on the device allocator).
#include <pybind11/complex.h>
#include <torch/csrc/Generator.h>
#include <torch/extension.h>

#include "profiler/NeuronTracer.h"
#include "runtime/NeuronDeviceAllocator.h"
#include "runtime/NeuronFunctions.h"
#include "runtime/NeuronGenerator.h"
#include "runtime/NeuronHostAllocator.h"
#include "runtime/NeuronStream.h"

using namespace torch_neuronx;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "C++ runtime objects of the torch_neuronx 'neuron' device (allocator, hooks, guard)";
  torch_neuronx::profiler::init_bindings(m);  // _C._profiler
  m.def("init", [](py::object bridge, std::vector<int64_t> capacities, bool caching) {
    TORCH_CHECK(g_bridge == nullptr, "torch_neuronx._C.init() called twice");
    set_memory_caching(caching);
    TORCH_CHECK(capacities.size() <= kMaxDevices, "at most ", kMaxDevices, " neuron devices are supported");
    g_bridge = new py::object(std::move(bridge));  // lives as long as the process
    g_capacity = std::move(capacities);
    g_device_count = static_cast<int>(g_capacity.size());
    watch_stream_objects();
  });
  m.def("current_device", [] { return static_cast<int>(t_device); });
  m.def("set_device", [](int d) {
    check_device(static_cast<c10::DeviceIndex>(d));
    t_device = static_cast<c10::DeviceIndex>(d);
  });
  m.def("current_stream_id", [](int d) {
    check_device(static_cast<c10::DeviceIndex>(d));
    return t_stream.at(d);
  });
  m.def("set_current_stream_id", [](int d, int64_t id) {
    check_device(static_cast<c10::DeviceIndex>(d));
    t_stream.at(d) = id;
  });
  m.def("default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(default_generator(static_cast<c10::DeviceIndex>(d))));
  });
  // (seed, offset) of a neuron generator for one draw, its offset advanced by `increment`.
  m.def("philox_reserve", [](py::handle generator, uint64_t increment) {
    TORCH_CHECK_TYPE(THPGenerator_Check(generator.ptr()), "expected a torch.Generator");
    return reserve(THPGenerator_Unwrap(generator.ptr()), increment);
  });
  // A 0-dim CPU tensor flagged as a wrapped number: how ATen passes a Python scalar to a Tensor
  // argument (it promotes like a scalar). Python cannot set the flag; the CPU fallback needs it.
  m.def("wrapped_number", [](py::handle value) {
    c10::Scalar scalar;
    if (py::isinstance<py::bool_>(value)) {
      scalar = value.cast<bool>();
    } else if (py::isinstance<py::int_>(value)) {
      scalar = value.cast<int64_t>();
    } else if (PyComplex_Check(value.ptr())) {
      scalar = c10::complex<double>(value.cast<std::complex<double>>());
    } else {
      scalar = value.cast<double>();
    }
    auto t = c10::scalar_to_tensor(scalar);
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    return t;
  });
  m.def("is_pinned", [](uintptr_t p) { return is_pinned(reinterpret_cast<void*>(p)); });
  m.def("empty_cache", [] { empty_cache(); });
  m.def("set_forget_invalid_on_reuse", [](bool enabled) { set_forget_invalid_on_reuse(enabled); });
  m.def("cached_blocks", [] { return cached_blocks(); });
  m.def("live_allocations", [] { return live_allocations(); });
}
