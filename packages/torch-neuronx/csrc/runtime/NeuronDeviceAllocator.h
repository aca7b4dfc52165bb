// The device allocator: a caching c10::DeviceAllocator over neuron_sim HBM (real host memory
// accounted against each NeuronCore's capacity), with the statistics torch.accelerator.memory_*
// and torch.neuron.memory_* report.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <cstddef>
#include <optional>

namespace torch_neuronx {

c10::DeviceAllocator* device_allocator();
void set_memory_caching(bool enabled);  // TORCH_NEURONX_NO_MEMORY_CACHING=1 turns it off (init)
void set_forget_invalid_on_reuse(bool enabled);  // while invalid device memory exists (validity.watch)
void empty_cache();                     // cached free blocks back to the HBM
size_t cached_blocks();
size_t live_allocations();
std::optional<c10::DeviceIndex> device_of_pointer(const void* p);

}  // namespace torch_neuronx
