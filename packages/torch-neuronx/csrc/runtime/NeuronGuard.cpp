// The device guard: the current device (thread-local), streams mapped onto simulator queues, and
// events whose elapsed time is simulated device time (NeuronStream, NeuronEvent).
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "NeuronEvent.h"
#include "NeuronFunctions.h"
#include "NeuronStream.h"

namespace torch_neuronx {
namespace {

using c10::DeviceIndex;

struct NeuronGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }
  c10::Device exchangeDevice(c10::Device d) const override {
    check_device(d.index());
    auto old = t_device;
    t_device = d.index();
    return {kNeuron, old};
  }
  c10::Device getDevice() const override { return {kNeuron, t_device}; }
  void setDevice(c10::Device d) const override {
    check_device(d.index());
    t_device = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { t_device = d.index(); }
  DeviceIndex deviceCount() const noexcept override { return static_cast<DeviceIndex>(g_device_count); }

  c10::Stream getStream(c10::Device d) const override { return current_stream(d.index()); }
  c10::Stream getDefaultStream(c10::Device d) const override { return default_stream(d.index()); }
  c10::Stream getNewStream(c10::Device d, int priority) const override { return new_stream(d.index(), priority); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return new_stream(d.index(), high_priority ? -1 : 0);
  }
  c10::Stream exchangeStream(c10::Stream s) const override { return exchange_stream(s); }
  bool queryStream(const c10::Stream& s) const override { return query_stream(s); }
  void synchronizeStream(const c10::Stream& s) const override { synchronize_stream(s); }
  void synchronizeDevice(const DeviceIndex d) const override { call("synchronize_device", static_cast<int>(d)); }

  void record(void** event, const c10::Stream& stream, const DeviceIndex, const c10::EventFlag flag) const override {
    record_event(event, stream, flag);
  }
  void block(void* event, const c10::Stream& stream) const override { block_on_event(event, stream); }
  bool queryEvent(void* event) const override { return query_event(event); }
  void destroyEvent(void* event, const DeviceIndex) const noexcept override { destroy_event(event); }
  void synchronizeEvent(void* event) const override { synchronize_event(event); }
  double elapsedTime(void* start, void* end, const DeviceIndex) const override { return elapsed_time(start, end); }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace torch_neuronx
