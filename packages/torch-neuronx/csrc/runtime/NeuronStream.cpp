#include "NeuronStream.h"

#include "NeuronFunctions.h"

namespace torch_neuronx {

c10::Stream current_stream(c10::DeviceIndex d) {
  auto index = d < 0 ? t_device : d;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, index), t_stream.at(index));
}

c10::Stream default_stream(c10::DeviceIndex d) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, d < 0 ? t_device : d), 0);
}

c10::Stream new_stream(c10::DeviceIndex d, int priority) {
  auto index = d < 0 ? t_device : d;
  check_device(index);
  auto id = call("new_stream", static_cast<int>(index), priority).cast<int64_t>();
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, index), id);
}

c10::Stream exchange_stream(const c10::Stream& s) {
  auto index = s.device_index();
  check_device(index);
  auto old = c10::Stream(c10::Stream::UNSAFE, s.device(), t_stream.at(index));
  t_stream.at(index) = s.id();
  return old;
}

bool query_stream(const c10::Stream& s) {
  return call("query_stream", static_cast<int>(s.device_index()), s.id()).cast<bool>();
}

void synchronize_stream(const c10::Stream& s) { call("synchronize_stream", static_cast<int>(s.device_index()), s.id()); }

}  // namespace torch_neuronx
