// Events: ids of simulator events kept by the Python bridge; their elapsed time is *simulated*
// device time.
#pragma once

#include <c10/core/Event.h>
#include <c10/core/Stream.h>

namespace torch_neuronx {

// The flag says whether the event times (torch.Event(enable_timing=True) -> BACKEND_DEFAULT): the
// bridge creates an untimed simulator event otherwise, so elapsed_time refuses it as CUDA does.
void record_event(void** event, const c10::Stream& stream, c10::EventFlag flag);
void block_on_event(void* event, const c10::Stream& stream);  // later work on stream waits for event
bool query_event(void* event);
void synchronize_event(void* event);
void destroy_event(void* event) noexcept;
double elapsed_time(void* start, void* end);  // milliseconds of simulated device time

}  // namespace torch_neuronx
