#include "NeuronStream.h"

#include <torch/csrc/Stream.h>

#include "NeuronFunctions.h"

namespace torch_neuronx {

namespace {
thread_local uint64_t t_new_streams = 0;  // streams this thread made (tells a constructor that made one)
newfunc g_stream_new = nullptr;           // torch.Stream's own constructor

PyObject* stream_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  auto before = t_new_streams;
  PyObject* obj = g_stream_new(type, args, kwargs);
  if (obj == nullptr || t_new_streams == before) return obj;  // failed, or a stream rebuilt from its ids
  auto* stream = reinterpret_cast<THPStream*>(obj);
  if (stream->device_type != static_cast<int64_t>(kNeuron)) return obj;
  try {
    call("stream_made", py::handle(obj));
  } catch (py::error_already_set& e) {
    Py_DECREF(obj);
    e.restore();
    return nullptr;
  }
  return obj;
}
}  // namespace

void watch_stream_objects() {
  if (g_stream_new != nullptr) return;
  g_stream_new = THPStreamClass->tp_new;
  THPStreamClass->tp_new = stream_new;  // subclasses (torch_neuronx.Stream) reach it through __new__
}

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
  ++t_new_streams;
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
