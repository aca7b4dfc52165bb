// The neuron profiler's state shared by its parts: the correlation id of the op each thread is
// running (Kineto pushes one per op while a session records; the launch an op makes is tagged
// with it, which is how device activities are attributed to ops), and the Python bindings the
// torch_neuronx.profiling side reads it through.
#pragma once

#include <torch/extension.h>

#include <cstdint>

namespace torch_neuronx::profiler {

void push_correlation(uint64_t id);
void pop_correlation();
uint64_t current_correlation();  // 0 when the thread runs no profiled op

// torch_neuronx._C._profiler: correlation_id() for the thread that calls it. A plain binding, not a
// torch op: an op would itself be profiled (and push a correlation id of its own).
void init_bindings(py::module_& m);

}  // namespace torch_neuronx::profiler
