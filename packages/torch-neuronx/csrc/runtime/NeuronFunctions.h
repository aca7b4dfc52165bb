// The device, its count, the current device and stream of each thread, and the calls into the
// Python bridge (torch_neuronx.device.bridge.Bridge) everything else forwards to.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace torch_neuronx {

namespace py = pybind11;

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;
constexpr int kMaxDevices = 64;

extern py::object* g_bridge;  // the Bridge instance (process lifetime), set by init()
extern int g_device_count;
extern std::vector<int64_t> g_capacity;  // HBM bytes per device

extern thread_local c10::DeviceIndex t_device;
extern thread_local std::array<c10::StreamId, kMaxDevices> t_stream;  // current stream per device (0 = default)

void check_device(c10::DeviceIndex d);

// Call a bridge method with the GIL held.
template <typename... Args>
py::object call(const char* name, Args&&... args) {
  TORCH_CHECK(g_bridge != nullptr, "torch_neuronx is not initialized (import torch_neuronx first)");
  py::gil_scoped_acquire gil;
  return g_bridge->attr(name)(std::forward<Args>(args)...);
}

// Call a bridge method from a destructor or deleter: never throws, and may run while a Python
// exception is being raised (temporaries of a failed op die then). That exception is parked while
// the bridge runs: Python code called with an error set fails in odd places (a `with lock:` that
// acquired the lock and never released it -> deadlock). Does nothing at interpreter shutdown.
template <typename... Args>
void call_quietly(const char* name, const char* what, Args&&... args) noexcept {
  if (g_bridge == nullptr || !Py_IsInitialized()) return;
  py::gil_scoped_acquire gil;
  py::error_scope pending;
  try {
    g_bridge->attr(name)(std::forward<Args>(args)...);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable(what);
  }
}

}  // namespace torch_neuronx
