#include "NeuronEvent.h"

#include "NeuronFunctions.h"

namespace torch_neuronx {
namespace {

uintptr_t id_of(void* event) { return reinterpret_cast<uintptr_t>(event); }

}  // namespace

void record_event(void** event, const c10::Stream& stream, c10::EventFlag flag) {
  auto id = call("record_event", id_of(*event), static_cast<int>(stream.device_index()), stream.id(),
                 flag == c10::EventFlag::BACKEND_DEFAULT)
                .cast<uintptr_t>();
  *event = reinterpret_cast<void*>(id);
}

void block_on_event(void* event, const c10::Stream& stream) {
  if (event == nullptr) return;
  call("block", id_of(event), static_cast<int>(stream.device_index()), stream.id());
}

bool query_event(void* event) {
  if (event == nullptr) return true;
  return call("query_event", id_of(event)).cast<bool>();
}

void synchronize_event(void* event) {
  if (event == nullptr) return;
  call("synchronize_event", id_of(event));
}

void destroy_event(void* event) noexcept {
  if (event == nullptr) return;
  call_quietly("destroy_event", "torch_neuronx: destroying an event", id_of(event));
}

double elapsed_time(void* start, void* end) {
  TORCH_CHECK(start != nullptr && end != nullptr, "both events must be recorded before calling elapsed_time()");
  return call("elapsed_time", id_of(start), id_of(end)).cast<double>();
}

}  // namespace torch_neuronx
