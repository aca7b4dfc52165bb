#include "NeuronHostAllocator.h"

#include <ATen/core/CachingHostAllocator.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace torch_neuronx {
namespace {

using c10::DeviceType;

// The PrivateUse1 host allocator torch asks for by device type (torch.accelerator.empty_host_cache,
// host memory stats): without one registered, at::getHostAllocator returns null and those calls
// crash. It caches nothing - each block goes back to the system when freed - so emptying the cache
// has nothing to release and every request is a host allocation.
struct PinnedAllocator final : at::HostAllocator {
  std::mutex mu;
  std::map<uintptr_t, size_t> live;
  at::HostStats stats;

  static void deleter(void* p);

  c10::DataPtr allocate(size_t n) override {
    void* p = nullptr;
    if (n > 0) {
      TORCH_CHECK(posix_memalign(&p, 4096, n) == 0, "pinned host allocation of ", n, " bytes failed");
      std::lock_guard<std::mutex> lock(mu);
      live[reinterpret_cast<uintptr_t>(p)] = n;
      for (auto* stat : {&stats.active_bytes, &stats.allocated_bytes}) stat->increase(n);
      for (auto* stat : {&stats.active_requests, &stats.allocations}) stat->increase(1);
      stats.num_host_alloc += 1;
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

  // The queues read a pinned source when the copy is enqueued, so no later stream use can see the
  // block freed: nothing to wait for. True when the pointer is one of ours, as CUDA's allocator answers.
  bool record_event(void* ptr, void* /*ctx*/, c10::Stream /*stream*/) override { return contains(ptr); }
  void empty_cache() override {}
  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mu);
    return stats;
  }
  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(mu);
    for (auto* stat : {&stats.active_requests, &stats.active_bytes, &stats.allocations, &stats.allocated_bytes}) {
      stat->reset_accumulated();
    }
    stats.num_host_alloc = stats.num_host_free = 0;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mu);
    for (auto* stat : {&stats.active_requests, &stats.active_bytes, &stats.allocations, &stats.allocated_bytes}) {
      stat->reset_peak();
    }
  }
};
PinnedAllocator g_pinned;
void PinnedAllocator::deleter(void* p) {
  if (p == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_pinned.mu);
    auto it = g_pinned.live.find(reinterpret_cast<uintptr_t>(p));
    if (it != g_pinned.live.end()) {
      for (auto* stat : {&g_pinned.stats.active_bytes, &g_pinned.stats.allocated_bytes}) stat->decrease(it->second);
      for (auto* stat : {&g_pinned.stats.active_requests, &g_pinned.stats.allocations}) stat->decrease(1);
      g_pinned.stats.num_host_free += 1;
      g_pinned.live.erase(it);
    }
  }
  std::free(p);
}

}  // namespace

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_pinned)

c10::Allocator* host_allocator() { return &g_pinned; }
bool is_pinned(const void* p) { return g_pinned.contains(p); }

}  // namespace torch_neuronx
