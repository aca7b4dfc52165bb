// Per-device generators: the CPU engine (Philox/MT state) tagged as a neuron device generator,
// so random ops on neuron draw from the device's own stream of numbers, independent of the CPU's.
#pragma once

#include <ATen/core/Generator.h>

namespace torch_neuronx {

const at::Generator& default_generator(c10::DeviceIndex d);  // d < 0: the current device
at::Generator new_generator(c10::DeviceIndex d);

}  // namespace torch_neuronx
