#include "NeuronTracer.h"

#include <vector>

namespace torch_neuronx::profiler {

namespace {
thread_local std::vector<uint64_t> t_correlation;  // a stack: ops nest (aten::linear -> aten::addmm)
}  // namespace

void push_correlation(uint64_t id) { t_correlation.push_back(id); }
void pop_correlation() {
  if (!t_correlation.empty()) t_correlation.pop_back();
}
uint64_t current_correlation() { return t_correlation.empty() ? 0 : t_correlation.back(); }

void init_bindings(py::module_& m) {
  auto sub = m.def_submodule("_profiler", "what torch_neuronx.profiling reads from the Kineto activity profiler");
  sub.def("correlation_id", [] { return current_correlation(); },
          "The Kineto correlation id of the innermost op this thread runs under a profiler (0: none)");
}

}  // namespace torch_neuronx::profiler
