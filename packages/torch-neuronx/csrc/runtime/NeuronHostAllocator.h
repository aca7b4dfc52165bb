// Pinned host memory: page-aligned host allocations remembered, so is_pinned() can answer.
#pragma once

#include <c10/core/Allocator.h>

namespace torch_neuronx {

c10::Allocator* host_allocator();
bool is_pinned(const void* p);

}  // namespace torch_neuronx
