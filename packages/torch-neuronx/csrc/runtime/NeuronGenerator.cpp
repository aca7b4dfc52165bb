#include "NeuronGenerator.h"

#include <ATen/Tensor.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/empty.h>
#include <c10/core/GeneratorImpl.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "NeuronFunctions.h"

namespace torch_neuronx {
namespace {

// The state tensor: seed then offset, each 8 bytes little-endian (the layout of CUDA's Philox state).
constexpr int64_t kStateBytes = 16;

struct NeuronGeneratorImpl : c10::GeneratorImpl {
  explicit NeuronGeneratorImpl(c10::DeviceIndex d, uint64_t seed = c10::default_rng_seed_val)
      : c10::GeneratorImpl(c10::Device(kNeuron, d), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)), seed_(seed) {}

  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    auto random = c10::detail::getNonDeterministicRandom();
    set_current_seed(random);
    return random;
  }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }

  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    auto state = at::empty({kStateBytes}, at::TensorOptions().dtype(at::kByte));
    auto* bytes = state.data_ptr<uint8_t>();
    std::memcpy(bytes, &seed_, 8);
    std::memcpy(bytes + 8, &offset_, 8);
    return state.getIntrusivePtr();
  }

  void set_state(const c10::TensorImpl& new_state) override {
    at::detail::check_rng_state(new_state);
    auto n = static_cast<int64_t>(new_state.numel());
    TORCH_CHECK(n == kStateBytes, "a neuron generator's RNG state is ", kStateBytes,
                " bytes (Philox seed and offset, 8 each), got ", n, " bytes",
                n == 5056 ? " - that is a CPU generator's state (torch.get_rng_state()); use "
                            "torch.neuron.get_rng_state() or a neuron Generator's get_state()"
                          : "");
    const auto* bytes = static_cast<const uint8_t*>(new_state.data());
    std::memcpy(&seed_, bytes, 8);
    std::memcpy(&offset_, bytes + 8, 8);
  }

  std::pair<uint64_t, uint64_t> reserve(uint64_t increment) {
    auto taken = std::make_pair(seed_, offset_);
    offset_ += increment;
    return taken;
  }

 private:
  NeuronGeneratorImpl* clone_impl() const override {
    auto* copy = new NeuronGeneratorImpl(device().index(), seed_);
    copy->offset_ = offset_;
    return copy;
  }

  uint64_t seed_;
  uint64_t offset_ = 0;
};

std::vector<at::Generator>& default_generators() {
  static std::vector<at::Generator> gens = [] {
    std::vector<at::Generator> v;
    for (int d = 0; d < std::max(g_device_count, 1); ++d) v.push_back(at::make_generator<NeuronGeneratorImpl>(d));
    return v;
  }();
  return gens;
}

c10::DeviceIndex resolve(c10::DeviceIndex d) {
  if (d < 0) d = t_device;
  check_device(d);
  return d;
}

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex d) { return default_generators().at(resolve(d)); }
at::Generator new_generator(c10::DeviceIndex d) { return at::make_generator<NeuronGeneratorImpl>(resolve(d)); }

std::pair<uint64_t, uint64_t> reserve(at::Generator gen, uint64_t increment) {
  TORCH_CHECK(gen.defined() && gen.device().type() == kNeuron,
              "expected a neuron generator, got one of device ", gen.defined() ? gen.device().str() : "(undefined)");
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<NeuronGeneratorImpl>()->reserve(increment);
}

}  // namespace torch_neuronx
