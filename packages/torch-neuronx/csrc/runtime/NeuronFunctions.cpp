#include "NeuronFunctions.h"

namespace torch_neuronx {

py::object* g_bridge = nullptr;
int g_device_count = 0;
std::vector<int64_t> g_capacity;

thread_local c10::DeviceIndex t_device = 0;
thread_local std::array<c10::StreamId, kMaxDevices> t_stream{};

void check_device(c10::DeviceIndex d) {
  TORCH_CHECK_INDEX(d >= 0 && d < g_device_count, "invalid neuron device index ", static_cast<int>(d), ": ",
                    g_device_count, " device(s) are visible (neuron:0 .. neuron:", g_device_count - 1,
                    "; see NEURON_RT_VISIBLE_CORES)");
}

}  // namespace torch_neuronx
