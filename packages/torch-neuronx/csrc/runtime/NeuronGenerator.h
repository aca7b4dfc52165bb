// Per-device generators: a counter-based Philox4x32-10 state (seed + offset), as CUDA's, held for
// the device. A random op reserves counter positions on the issuing thread (reserve()) and hands
// (seed, offset) to the device program that computes the numbers - so the state never waits for
// the device, and get_state()/set_state() need no synchronization.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <utility>

namespace torch_neuronx {

const at::Generator& default_generator(c10::DeviceIndex d);  // d < 0: the current device
at::Generator new_generator(c10::DeviceIndex d);

// (seed, offset) for a draw, and advance the offset by `increment` - atomically under the
// generator's lock. Refuses a generator that is not a neuron one.
std::pair<uint64_t, uint64_t> reserve(at::Generator gen, uint64_t increment);

}  // namespace torch_neuronx
