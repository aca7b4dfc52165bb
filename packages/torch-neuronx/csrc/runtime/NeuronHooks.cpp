// The PrivateUse1 hooks: device count and current device, per-device generators, the device of a
// pointer, pinned host memory, storage resize.
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include <algorithm>
#include <cstring>

#include "NeuronDeviceAllocator.h"
#include "NeuronFunctions.h"
#include "NeuronGenerator.h"
#include "NeuronHostAllocator.h"

namespace torch_neuronx {
namespace {

using c10::DeviceIndex;

struct NeuronHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return g_device_count > 0; }
  bool hasPrimaryContext(DeviceIndex) const override { return g_bridge != nullptr; }
  DeviceIndex deviceCount() const override { return static_cast<DeviceIndex>(g_device_count); }
  void setCurrentDevice(DeviceIndex d) const override { check_device(d); t_device = d; }
  DeviceIndex getCurrentDevice() const override { return t_device; }
  DeviceIndex exchangeDevice(DeviceIndex d) const override {
    check_device(d);
    auto old = t_device;
    t_device = d;
    return old;
  }
  DeviceIndex maybeExchangeDevice(DeviceIndex d) const override { return exchangeDevice(d); }

  const at::Generator& getDefaultGenerator(DeviceIndex d) const override { return default_generator(d); }
  at::Generator getNewGenerator(DeviceIndex d) const override { return new_generator(d); }
  at::Device getDeviceFromPtr(void* p) const override { return {kNeuron, device_of_pointer(p).value_or(t_device)}; }
  bool isPinnedPtr(const void* p) const override { return is_pinned(p); }
  at::Allocator* getPinnedMemoryAllocator() const override { return host_allocator(); }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_size) const override {
    auto* impl = storage.unsafeGetStorageImpl();
    auto device = impl->device().index();
    auto old = t_device;
    t_device = device;
    auto fresh = device_allocator()->allocate(new_size);
    t_device = old;
    auto keep = std::min(new_size, impl->nbytes());
    if (keep > 0) std::memcpy(fresh.get(), impl->data(), keep);
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(new_size);
  }
};

bool registered = [] {
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
  return true;
}();

}  // namespace
}  // namespace torch_neuronx
