// The empty kernels on the device allocator: every other op kernel is Python (torch_neuronx.kernels).
//
// scaled_dot_product_attention asks _fused_sdp_choice_stub which kernel to use. It is left
// unregistered for neuron: attention then takes the math path (matmuls, softmax, dropout), whose
// ops compile for the NeuronCore, instead of CPU's fused flash kernel (which could only run
// through CPU fallback).
#include <ATen/EmptyTensor.h>
#include <torch/library.h>

#include "../runtime/NeuronDeviceAllocator.h"

namespace torch_neuronx {
namespace {

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout>,
                               std::optional<c10::Device> device, std::optional<bool>,
                               std::optional<c10::MemoryFormat> memory_format) {
  const c10::DeviceGuard guard(c10::device_or_default(device));
  return at::detail::empty_generic(size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout>, std::optional<c10::Device> device, std::optional<bool>) {
  const c10::DeviceGuard guard(c10::device_or_default(device));
  return at::detail::empty_strided_generic(size, stride, device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
}

}  // namespace torch_neuronx
