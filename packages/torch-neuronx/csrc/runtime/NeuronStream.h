// Streams: ids of simulator queues kept by the Python bridge (0 is each device's default queue);
// the current stream of each device is thread-local.
#pragma once

#include <c10/core/Stream.h>

namespace torch_neuronx {

c10::Stream current_stream(c10::DeviceIndex d);  // d < 0: the current device
c10::Stream default_stream(c10::DeviceIndex d);
c10::Stream new_stream(c10::DeviceIndex d, int priority);
c10::Stream exchange_stream(const c10::Stream& s);  // make s current on its device; returns the previous one
bool query_stream(const c10::Stream& s);
void synchronize_stream(const c10::Stream& s);

// torch.Stream(device="neuron") objects hold only their ids, so nothing tells the device when
// one is collected: wrap torch.Stream's constructor so that each object that made a new neuron
// stream is handed to the bridge (stream_made), which releases its queue once it is collected.
void watch_stream_objects();

}  // namespace torch_neuronx
