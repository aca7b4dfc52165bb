// The C++ part of the "neuron" PrivateUse1 backend: only what Python cannot provide in torch 2.13.
//
//   * NeuronAllocator: a caching c10::DeviceAllocator whose memory comes from neuron_sim's HBM
//     (real host memory accounted against each NeuronCore's capacity) through a Python callback,
//     with the per-device statistics torch.accelerator.memory_* and torch.neuron.memory_* report.
//   * NeuronHooks: device count, per-device generators, storage resize, pinned host memory.
//   * NeuronGuard: the current device (thread-local), streams mapped onto simulator queues, and
//     events whose elapsed time is *simulated* device time - all forwarded to Python.
//   * empty.memory_format / empty_strided kernels on that allocator.
//
// Everything that calls into Python takes the GIL; callbacks are installed once by init().

#include <torch/extension.h>
#include <pybind11/complex.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/Generator.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace py = pybind11;
using c10::DeviceIndex;
using c10::DeviceType;
using c10::StreamId;
namespace stats = c10::CachingAllocator;
namespace cda = c10::CachingDeviceAllocator;

namespace {

constexpr auto kNeuron = DeviceType::PrivateUse1;
constexpr int kMaxDevices = 64;

py::object* g_callbacks = nullptr;  // torch_neuronx._runtime_bridge.Bridge instance (process lifetime)
int g_device_count = 0;
std::vector<int64_t> g_capacity;  // HBM bytes per device

thread_local DeviceIndex t_device = 0;
thread_local std::array<StreamId, kMaxDevices> t_stream{};  // current stream per device (0 = default)

// Call a bridge method with the GIL held.
template <typename... Args>
py::object call(const char* name, Args&&... args) {
  TORCH_CHECK(g_callbacks != nullptr, "torch_neuronx is not initialized (import torch_neuronx first)");
  py::gil_scoped_acquire gil;
  return g_callbacks->attr(name)(std::forward<Args>(args)...);
}

void check_device(DeviceIndex d) {
  TORCH_CHECK_INDEX(d >= 0 && d < g_device_count, "invalid neuron device index ", static_cast<int>(d), ": ",
                    g_device_count, " device(s) are visible (neuron:0 .. neuron:", g_device_count - 1,
                    "; see NEURON_RT_VISIBLE_CORES)");
}

// ---------------------------------------------------------------------------------------------
// Allocator
// ---------------------------------------------------------------------------------------------
struct Block {
  size_t size;      // bytes asked for
  size_t reserved;  // bytes of the HBM block behind it (rounded up; what a reuse may serve)
  DeviceIndex device;
  StreamId stream;            // the stream current when it was allocated: the pool it returns to
  bool other_streams = false;  // record_stream() named another stream: never cached
};

bool g_caching = true;  // TORCH_NEURONX_NO_MEMORY_CACHING=1 turns it off (init)

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
    // Frees happen on autograd worker threads and at interpreter shutdown.
    if (g_callbacks == nullptr || !Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    // A tensor may die while a Python exception is being raised (temporaries of a failed op).
    // Park that exception while the bridge runs: Python code called with an error set fails in
    // odd places (a `with lock:` that acquired the lock and never released it -> deadlock).
    py::error_scope pending;
    try {
      g_callbacks->attr("free")(addr);
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("torch_neuronx: freeing device memory");
    }
  }

  c10::DeleterFnPtr raw_deleter() const override { return &NeuronAllocator::deleter; }

  // Device memory is host memory: copies between device buffers are plain memcpy.
  void copy_data(void* dst, const void* src, std::size_t n) const override { std::memcpy(dst, src, n); }

  bool initialized() override { return g_callbacks != nullptr; }
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
REGISTER_ALLOCATOR(kNeuron, &g_allocator);

// Pinned host memory: page-aligned host allocations we remember, so is_pinned() can answer.
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

// ---------------------------------------------------------------------------------------------
// Hooks: generators, storage resize, pinned memory
// ---------------------------------------------------------------------------------------------
// The CPU engine (Philox/MT state), tagged as a neuron device generator: random ops on neuron
// draw from the device's own stream of numbers, independent of the CPU generator.
struct NeuronGenerator : at::CPUGeneratorImpl {
  explicit NeuronGenerator(DeviceIndex d) : at::CPUGeneratorImpl() {
    device_ = c10::Device(kNeuron, d);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }
};

std::vector<at::Generator>& default_generators() {
  static std::vector<at::Generator> gens = [] {
    std::vector<at::Generator> v;
    for (int d = 0; d < std::max(g_device_count, 1); ++d) v.push_back(at::make_generator<NeuronGenerator>(d));
    return v;
  }();
  return gens;
}

struct NeuronHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return g_device_count > 0; }
  bool hasPrimaryContext(DeviceIndex) const override { return g_callbacks != nullptr; }
  DeviceIndex deviceCount() const override { return static_cast<DeviceIndex>(g_device_count); }
  void setCurrentDevice(DeviceIndex d) const override { check_device(d); t_device = d; }
  DeviceIndex getCurrentDevice() const override { return t_device; }
  DeviceIndex exchangeDevice(DeviceIndex d) const override {
    check_device(d);
    auto old = t_device;
    t_device = d;
    return old;
  }
  DeviceIndex maybeExchangeDevice(DeviceIndex d) const override { return exchangeDevice(d); }

  const at::Generator& getDefaultGenerator(DeviceIndex d) const override {
    if (d < 0) d = t_device;
    check_device(d);
    return default_generators().at(d);
  }
  at::Generator getNewGenerator(DeviceIndex d) const override {
    if (d < 0) d = t_device;
    check_device(d);
    return at::make_generator<NeuronGenerator>(d);
  }
  at::Device getDeviceFromPtr(void* p) const override {
    auto d = g_allocator.device_of(p);
    return {kNeuron, d.value_or(t_device)};
  }
  bool isPinnedPtr(const void* p) const override { return g_pinned.contains(p); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned; }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_size) const override {
    auto* impl = storage.unsafeGetStorageImpl();
    auto device = impl->device().index();
    auto old = t_device;
    t_device = device;
    auto fresh = g_allocator.allocate(new_size);
    t_device = old;
    auto keep = std::min(new_size, impl->nbytes());
    if (keep > 0) std::memcpy(fresh.get(), impl->data(), keep);
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(new_size);
  }
};

// ---------------------------------------------------------------------------------------------
// Device guard: devices, streams and events (forwarded to the simulator runtime in Python)
// ---------------------------------------------------------------------------------------------
struct NeuronGuard final : c10::impl::DeviceGuardImplInterface {
  DeviceType type() const override { return kNeuron; }
  c10::Device exchangeDevice(c10::Device d) const override {
    check_device(d.index());
    auto old = t_device;
    t_device = d.index();
    return {kNeuron, old};
  }
  c10::Device getDevice() const override { return {kNeuron, t_device}; }
  void setDevice(c10::Device d) const override {
    check_device(d.index());
    t_device = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { t_device = d.index(); }
  DeviceIndex deviceCount() const noexcept override { return static_cast<DeviceIndex>(g_device_count); }

  c10::Stream getStream(c10::Device d) const override {
    auto index = d.index() < 0 ? t_device : d.index();
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, index), t_stream.at(index));
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, d.index() < 0 ? t_device : d.index()), 0);
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    auto index = d.index() < 0 ? t_device : d.index();
    check_device(index);
    auto id = call("new_stream", static_cast<int>(index), priority).cast<int64_t>();
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, index), id);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return getNewStream(d, high_priority ? -1 : 0);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    auto index = s.device_index();
    check_device(index);
    auto old = c10::Stream(c10::Stream::UNSAFE, s.device(), t_stream.at(index));
    t_stream.at(index) = s.id();
    return old;
  }

  // Events are ids of simulator events kept by the Python bridge.
  // The flag says whether the event times (torch.Event(enable_timing=True) -> BACKEND_DEFAULT);
  // the bridge creates an untimed simulator event otherwise, so elapsed_time refuses it as CUDA does.
  void record(void** event, const c10::Stream& stream, const DeviceIndex, const c10::EventFlag flag) const override {
    auto id = call("record_event", reinterpret_cast<uintptr_t>(*event), static_cast<int>(stream.device_index()),
                   stream.id(), flag == c10::EventFlag::BACKEND_DEFAULT)
                  .cast<uintptr_t>();
    *event = reinterpret_cast<void*>(id);
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) return;
    call("block", reinterpret_cast<uintptr_t>(event), static_cast<int>(stream.device_index()), stream.id());
  }
  bool queryEvent(void* event) const override {
    if (event == nullptr) return true;
    return call("query_event", reinterpret_cast<uintptr_t>(event)).cast<bool>();
  }
  void destroyEvent(void* event, const DeviceIndex) const noexcept override {
    if (event == nullptr || g_callbacks == nullptr || !Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    py::error_scope pending;  // as in NeuronAllocator::release: may run while an exception is raised
    try {
      g_callbacks->attr("destroy_event")(reinterpret_cast<uintptr_t>(event));
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("torch_neuronx: destroying an event");
    }
  }
  void synchronizeEvent(void* event) const override {
    if (event == nullptr) return;
    call("synchronize_event", reinterpret_cast<uintptr_t>(event));
  }
  double elapsedTime(void* start, void* end, const DeviceIndex) const override {
    TORCH_CHECK(start != nullptr && end != nullptr, "both events must be recorded before calling elapsed_time()");
    return call("elapsed_time", reinterpret_cast<uintptr_t>(start), reinterpret_cast<uintptr_t>(end)).cast<double>();
  }
  bool queryStream(const c10::Stream& stream) const override {
    return call("query_stream", static_cast<int>(stream.device_index()), stream.id()).cast<bool>();
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    call("synchronize_stream", static_cast<int>(stream.device_index()), stream.id());
  }
  void synchronizeDevice(const DeviceIndex d) const override { call("synchronize_device", static_cast<int>(d)); }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuard);

// ---------------------------------------------------------------------------------------------
// empty kernels
// ---------------------------------------------------------------------------------------------
at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout>,
                               std::optional<c10::Device> device, std::optional<bool>,
                               std::optional<c10::MemoryFormat> memory_format) {
  const c10::DeviceGuard guard(c10::device_or_default(device));
  return at::detail::empty_generic(size, &g_allocator, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout>, std::optional<c10::Device> device, std::optional<bool>) {
  const c10::DeviceGuard guard(c10::device_or_default(device));
  return at::detail::empty_strided_generic(size, stride, &g_allocator,
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

bool hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
  return true;
}();

}  // namespace

// scaled_dot_product_attention asks _fused_sdp_choice_stub which kernel to use. It is left
// unregistered for neuron: attention then takes the math path (matmuls, softmax, dropout), whose
// ops compile for the NeuronCore, instead of CPU's fused flash kernel (which could only run
// through CPU fallback).

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "C++ runtime objects of the torch_neuronx 'neuron' device (allocator, hooks, guard)";
  m.def("init", [](py::object callbacks, std::vector<int64_t> capacities, bool caching) {
    TORCH_CHECK(g_callbacks == nullptr, "torch_neuronx._C.init() called twice");
    g_caching = caching;
    TORCH_CHECK(capacities.size() <= kMaxDevices, "at most ", kMaxDevices, " neuron devices are supported");
    g_callbacks = new py::object(std::move(callbacks));  // lives as long as the process
    g_capacity = std::move(capacities);
    g_device_count = static_cast<int>(g_capacity.size());
  });
  m.def("current_device", [] { return static_cast<int>(t_device); });
  m.def("set_device", [](int d) {
    check_device(static_cast<DeviceIndex>(d));
    t_device = static_cast<DeviceIndex>(d);
  });
  m.def("current_stream_id", [](int d) {
    check_device(static_cast<DeviceIndex>(d));
    return t_stream.at(d);
  });
  m.def("set_current_stream_id", [](int d, int64_t id) {
    check_device(static_cast<DeviceIndex>(d));
    t_stream.at(d) = id;
  });
  m.def("default_generator", [](int d) {
    check_device(static_cast<DeviceIndex>(d));
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(default_generators().at(d)));
  });
  // A 0-dim CPU tensor flagged as a wrapped number: how ATen passes a Python scalar to a Tensor
  // argument (it promotes like a scalar). Python cannot set the flag; the CPU fallback needs it.
  m.def("wrapped_number", [](py::handle value) {
    c10::Scalar scalar;
    if (py::isinstance<py::bool_>(value)) {
      scalar = value.cast<bool>();
    } else if (py::isinstance<py::int_>(value)) {
      scalar = value.cast<int64_t>();
    } else if (PyComplex_Check(value.ptr())) {
      scalar = c10::complex<double>(value.cast<std::complex<double>>());
    } else {
      scalar = value.cast<double>();
    }
    auto t = c10::scalar_to_tensor(scalar);
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    return t;
  });
  m.def("is_pinned", [](uintptr_t p) { return g_pinned.contains(reinterpret_cast<void*>(p)); });
  m.def("empty_cache", [] { g_allocator.release_cached(-1); });
  m.def("cached_blocks", [] {
    std::lock_guard<std::mutex> lock(g_allocator.mu);
    size_t n = 0;
    for (auto& per_stream : g_allocator.cached) {
      for (auto& [stream, pool] : per_stream) n += pool.size();
    }
    return n;
  });
  m.def("live_allocations", [] {
    std::lock_guard<std::mutex> lock(g_allocator.mu);
    return g_allocator.live.size();
  });
}
