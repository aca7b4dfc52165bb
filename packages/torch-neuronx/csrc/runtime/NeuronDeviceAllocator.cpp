#include "NeuronDeviceAllocator.h"

#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "NeuronFunctions.h"

namespace torch_neuronx {
namespace {

using c10::DeviceIndex;
using c10::StreamId;
namespace cda = c10::CachingDeviceAllocator;

struct Block {
  size_t size;      // bytes asked for
  size_t reserved;  // bytes of the HBM block behind it (rounded up; what a reuse may serve)
  DeviceIndex device;
  StreamId stream;            // the stream current when it was allocated: the pool it returns to
  bool other_streams = false;  // record_stream() named another stream: never cached
};

bool g_caching = true;
// Set while some device memory is invalid (a failed launch did not write it, see
// neuron_sim.memory.validity): a block reused from the cache holds a new tensor, so the bridge
// forgets its invalid ranges; otherwise reuse needs no call into Python.
std::atomic<bool> g_forget_invalid_on_reuse{false};

// Reuse granularity: small blocks in 512 B steps, large ones in 64 KiB steps (<= 6% waste), and a
// cached block serves a request at most 1/8 smaller than itself.
size_t round_block(size_t n) {
  size_t step = n < (1u << 20) ? 512 : (64u << 10);
  return (n + step - 1) / step * step;
}

// A caching allocator, as CUDA's: freed blocks stay reserved (counted against the simulated HBM)
// and serve later allocations of a similar size without a call into Python; an allocation that
// finds the HBM full releases the cache and retries; empty_cache() releases it. Reuse is safe
// for the same reason as on CUDA: a freed block goes back to the pool of the stream it was
// allocated on and serves only later allocations on that stream, whose work runs after the work
// queued before the free. A block used on other streams (Tensor.record_stream) is not cached:
// it returns to the HBM, and the host memory of a pending launch's views stays valid.
struct NeuronAllocator final : c10::DeviceAllocator {
  std::mutex mu;
  std::map<uintptr_t, Block> live;  // address -> block, for frees, stats and getDeviceFromPtr
  // Per device and stream: reserved size -> free block.
  std::array<std::map<StreamId, std::multimap<size_t, uintptr_t>>, kMaxDevices> cached;
  std::array<cda::DeviceStats, kMaxDevices> device_stats;

  static void deleter(void* ctx);

  c10::DataPtr allocate(size_t n) override {
    DeviceIndex d = t_device;
    check_device(d);
    if (n == 0) {
      return {nullptr, nullptr, &NeuronAllocator::deleter, c10::Device(kNeuron, d)};
    }
    size_t reserved = round_block(n);
    uintptr_t addr = take_cached(d, reserved, n).first;
    if (addr != 0 && g_forget_invalid_on_reuse.load(std::memory_order_relaxed)) call("reused", addr);
    if (addr == 0) {
      addr = malloc_from_hbm(d, reserved);
      record_live(addr, n, reserved, d, /*fresh=*/true);
    }
    void* p = reinterpret_cast<void*>(addr);
    return {p, p, &NeuronAllocator::deleter, c10::Device(kNeuron, d)};
  }

  // Take a cached block of at least `reserved` bytes (and not much more) and count it live for
  // `n` bytes: (address, its size), or (0, 0).
  std::pair<uintptr_t, size_t> take_cached(DeviceIndex d, size_t reserved, size_t n) {
    std::lock_guard<std::mutex> lock(mu);
    auto& pool = cached[d][t_stream[d]];
    auto it = pool.lower_bound(reserved);
    if (it == pool.end() || it->first > reserved + reserved / 8) return {0, 0};
    auto [size, addr] = *it;
    pool.erase(it);
    record_live_locked(addr, n, size, d, /*fresh=*/false);
    return {addr, size};
  }

  uintptr_t malloc_from_hbm(DeviceIndex d, size_t reserved) {
    for (int attempt = 0;; ++attempt) {
      try {
        return call("malloc", static_cast<int>(d), reserved).cast<uintptr_t>();
      } catch (py::error_already_set&) {
        bool had_cache = false;
        {
          std::lock_guard<std::mutex> lock(mu);
          for (auto& [stream, pool] : cached[d]) had_cache = had_cache || !pool.empty();
          if (!had_cache || attempt > 0) device_stats[d].num_ooms += 1;
        }
        if (!had_cache || attempt > 0) throw;  // NeuronOutOfMemoryError (a torch.OutOfMemoryError) propagates
        {
          std::lock_guard<std::mutex> lock(mu);
          device_stats[d].num_alloc_retries += 1;
        }
        release_cached(d);
      }
    }
  }

  // Count a block of `reserved` bytes live for `n` bytes; `fresh` if it was just taken from the HBM.
  void record_live(uintptr_t addr, size_t n, size_t reserved, DeviceIndex d, bool fresh) {
    std::lock_guard<std::mutex> lock(mu);
    record_live_locked(addr, n, reserved, d, fresh);
  }

  void record_live_locked(uintptr_t addr, size_t n, size_t reserved, DeviceIndex d, bool fresh) {
    live[addr] = Block{n, reserved, d, t_stream[d]};
    auto& s = device_stats[d];
    for (auto* stat : {&s.allocation[0], &s.active[0]}) stat->increase(1);
    for (auto* stat : {&s.allocated_bytes[0], &s.active_bytes[0], &s.requested_bytes[0]}) stat->increase(n);
    if (fresh) {
      s.segment[0].increase(1);
      s.reserved_bytes[0].increase(reserved);
    }
  }

  void release(uintptr_t addr) {
    Block block{0, 0, 0};
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = live.find(addr);
      if (it == live.end()) return;
      block = it->second;
      live.erase(it);
      auto& s = device_stats[block.device];
      for (auto* stat : {&s.allocation[0], &s.active[0]}) stat->decrease(1);
      for (auto* stat : {&s.allocated_bytes[0], &s.active_bytes[0], &s.requested_bytes[0]}) stat->decrease(block.size);
      if (g_caching && !block.other_streams && Py_IsInitialized()) {
        cached[block.device][block.stream].emplace(block.reserved, addr);
        return;
      }
    }
    return_to_hbm(addr, block.reserved, block.device);
  }

  // Give cached blocks of device d (all devices if d < 0) back to the HBM.
  void release_cached(int d) {
    std::vector<std::pair<uintptr_t, std::pair<size_t, DeviceIndex>>> blocks;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (int i = 0; i < g_device_count; ++i) {
        if (d >= 0 && i != d) continue;
        for (auto& [stream, pool] : cached[i]) {
          for (auto& [size, addr] : pool) blocks.push_back({addr, {size, static_cast<DeviceIndex>(i)}});
        }
        cached[i].clear();
      }
    }
    for (auto& [addr, info] : blocks) return_to_hbm(addr, info.first, info.second);
  }

  void return_to_hbm(uintptr_t addr, size_t reserved, DeviceIndex device) {
    {
      std::lock_guard<std::mutex> lock(mu);
      auto& s = device_stats[device];
      s.segment[0].decrease(1);
      s.reserved_bytes[0].decrease(reserved);
    }
    // Frees happen on autograd worker threads, while exceptions are raised and at shutdown.
    call_quietly("free", "torch_neuronx: freeing device memory", addr);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &NeuronAllocator::deleter; }

  // Device memory is host memory: copies between device buffers are plain memcpy.
  void copy_data(void* dst, const void* src, std::size_t n) const override { std::memcpy(dst, src, n); }

  bool initialized() override { return g_bridge != nullptr; }
  void emptyCache(c10::MempoolId_t) override { release_cached(-1); }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    std::lock_guard<std::mutex> lock(mu);
    auto it = live.find(reinterpret_cast<uintptr_t>(ptr.get_context()));
    if (it != live.end() && stream.id() != it->second.stream) it->second.other_streams = true;
  }

  cda::DeviceStats getDeviceStats(DeviceIndex d) override {
    check_device(d);
    std::lock_guard<std::mutex> lock(mu);
    return device_stats[d];
  }

  void resetAccumulatedStats(DeviceIndex d) override {
    check_device(d);
    std::lock_guard<std::mutex> lock(mu);
    auto& s = device_stats[d];
    for (auto* arr : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes, &s.reserved_bytes,
                      &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
      for (auto& stat : *arr) stat.reset_accumulated();
    }
    s.num_alloc_retries = 0;
    s.num_ooms = 0;
  }

  void resetPeakStats(DeviceIndex d) override {
    check_device(d);
    std::lock_guard<std::mutex> lock(mu);
    auto& s = device_stats[d];
    for (auto* arr : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes, &s.reserved_bytes,
                      &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
      for (auto& stat : *arr) stat.reset_peak();
    }
  }

  std::pair<size_t, size_t> getMemoryInfo(DeviceIndex d) override {
    check_device(d);
    std::lock_guard<std::mutex> lock(mu);
    auto total = static_cast<size_t>(g_capacity.at(d));
    auto used = static_cast<size_t>(device_stats[d].reserved_bytes[0].current);
    return {total - std::min(total, used), total};
  }

  std::optional<DeviceIndex> device_of(const void* p) {
    auto addr = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(mu);
    auto it = live.upper_bound(addr);
    if (it == live.begin()) return std::nullopt;
    --it;
    if (addr < it->first + it->second.size) return it->second.device;
    return std::nullopt;
  }
};

NeuronAllocator g_allocator;
void NeuronAllocator::deleter(void* ctx) {
  if (ctx != nullptr) g_allocator.release(reinterpret_cast<uintptr_t>(ctx));
}

}  // namespace

REGISTER_ALLOCATOR(kNeuron, &g_allocator);

c10::DeviceAllocator* device_allocator() { return &g_allocator; }
void set_memory_caching(bool enabled) { g_caching = enabled; }
void set_forget_invalid_on_reuse(bool enabled) { g_forget_invalid_on_reuse.store(enabled); }
void empty_cache() { g_allocator.release_cached(-1); }

size_t cached_blocks() {
  std::lock_guard<std::mutex> lock(g_allocator.mu);
  size_t n = 0;
  for (auto& per_stream : g_allocator.cached) {
    for (auto& [stream, pool] : per_stream) n += pool.size();
  }
  return n;
}

size_t live_allocations() {
  std::lock_guard<std::mutex> lock(g_allocator.mu);
  return g_allocator.live.size();
}

std::optional<DeviceIndex> device_of_pointer(const void* p) { return g_allocator.device_of(p); }

}  // namespace torch_neuronx
