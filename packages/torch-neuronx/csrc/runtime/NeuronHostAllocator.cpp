#include "NeuronHostAllocator.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace torch_neuronx {
namespace {

using c10::DeviceType;

struct PinnedAllocator final : c10::Allocator {
  std::mutex mu;
  std::map<uintptr_t, size_t> live;

  static void deleter(void* p);

  c10::DataPtr allocate(size_t n) override {
    void* p = nullptr;
    if (n > 0) {
      TORCH_CHECK(posix_memalign(&p, 4096, n) == 0, "pinned host allocation of ", n, " bytes failed");
      std::lock_guard<std::mutex> lock(mu);
      live[reinterpret_cast<uintptr_t>(p)] = n;
    }
    return {p, p, &PinnedAllocator::deleter, c10::Device(DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &PinnedAllocator::deleter; }
  void copy_data(void* dst, const void* src, std::size_t n) const override { std::memcpy(dst, src, n); }

  bool contains(const void* p) {
    auto addr = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(mu);
    auto it = live.upper_bound(addr);
    if (it == live.begin()) return false;
    --it;
    return addr < it->first + it->second;
  }
};
PinnedAllocator g_pinned;
void PinnedAllocator::deleter(void* p) {
  if (p == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_pinned.mu);
    g_pinned.live.erase(reinterpret_cast<uintptr_t>(p));
  }
  std::free(p);
}

}  // namespace

c10::Allocator* host_allocator() { return &g_pinned; }
bool is_pinned(const void* p) { return g_pinned.contains(p); }

}  // namespace torch_neuronx
