#include "NeuronGenerator.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <vector>

#include "NeuronFunctions.h"

namespace torch_neuronx {
namespace {

struct NeuronGenerator : at::CPUGeneratorImpl {
  explicit NeuronGenerator(c10::DeviceIndex d) : at::CPUGeneratorImpl() {
    device_ = c10::Device(kNeuron, d);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }
};

std::vector<at::Generator>& default_generators() {
  static std::vector<at::Generator> gens = [] {
    std::vector<at::Generator> v;
    for (int d = 0; d < std::max(g_device_count, 1); ++d) v.push_back(at::make_generator<NeuronGenerator>(d));
    return v;
  }();
  return gens;
}

c10::DeviceIndex resolve(c10::DeviceIndex d) {
  if (d < 0) d = t_device;
  check_device(d);
  return d;
}

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex d) { return default_generators().at(resolve(d)); }
at::Generator new_generator(c10::DeviceIndex d) { return at::make_generator<NeuronGenerator>(resolve(d)); }

}  // namespace torch_neuronx
