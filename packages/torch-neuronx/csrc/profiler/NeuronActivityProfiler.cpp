// torch.profiler on the neuron device: a Kineto activity profiler for PrivateUse1 (as PyTorch's
// OpenReg backend has one). Kineto configures a session when a profile lists
// ProfilerActivity.PrivateUse1; the session starts and stops a capture window in Python
// (torch_neuronx.profiling.kineto_window, which records the runtime's launches and writes the
// Neuron Explorer session), keeps the correlation id of the op each thread runs (so each launch is
// tagged with the op that issued it), and at the end turns the window's launches into Kineto device
// activities linked to those ops: key_averages() then has the simulated device time of each op in
// its PrivateUse1 columns, and the Chrome trace a track per NeuronCore queue with flows from the ops.
#define USE_KINETO 1  // torch 2.13 is built with Kineto; its PrivateUse1 headers are behind this flag

#include <torch/extension.h>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "NeuronTracer.h"

namespace torch_neuronx::profiler {
namespace {

constexpr const char* kWindow = "torch_neuronx.profiling.kineto_window";

// One launch: (name, start_ns, end_ns, device, resource, correlation, kind, runtime event name, issued_ns,
// pid, thread id) - host wall-clock nanoseconds, the clock Kineto's CPU events use. The runtime event is
// the instant the op's thread issued the launch: the flow arrow starts there, inside the op.
using Activity = std::tuple<std::string, int64_t, int64_t, int64_t, int64_t, int64_t, std::string, std::string, int64_t,
                            int64_t, int64_t>;
using Resource = std::tuple<int64_t, int64_t, std::string>;  // (id, device, name)

libkineto::ActivityType activity_type(const std::string& kind) {
  return kind == "copy" ? libkineto::ActivityType::GPU_MEMCPY : libkineto::ActivityType::CONCURRENT_KERNEL;
}

void set_flow(libkineto::GenericTraceActivity& activity, uint32_t id, bool start) {
  activity.flow.id = id;
  activity.flow.type = libkineto::kLinkAsyncCpuGpu;
  activity.flow.start = start;
}

const std::set<libkineto::ActivityType>& device_activities() {
  static const std::set<libkineto::ActivityType> types{libkineto::ActivityType::CONCURRENT_KERNEL,
                                                       libkineto::ActivityType::GPU_MEMCPY};
  return types;
}

class NeuronActivityProfilerSession : public libkineto::IActivityProfilerSession {
 public:
  explicit NeuronActivityProfilerSession(std::string custom_config) : custom_config_(std::move(custom_config)) {}

  void start() override {
    call("start", [&](py::module_ window) { window_ = window.attr("start")(custom_config_).cast<int64_t>(); });
    if (status_ != libkineto::TraceStatus::ERROR) status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (window_ >= 0) call("stop", [&](py::module_ window) { window.attr("stop")(window_); });
    if (status_ != libkineto::TraceStatus::ERROR) status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked, int64_t,
                    int64_t) override {
    if (window_ < 0) return;
    std::vector<Activity> records;
    call("activities", [&](py::module_ window) {
      auto result = window.attr("activities")(window_).cast<std::tuple<std::vector<Activity>, std::vector<Resource>>>();
      records = std::move(std::get<0>(result));
      resources_ = std::move(std::get<1>(result));
    });
    window_ = -1;
    if (records.empty()) return;
    int64_t first = std::get<1>(records.front()), last = std::get<2>(records.front());
    for (const auto& r : records) {
      first = std::min(first, std::get<1>(r));
      last = std::max(last, std::get<2>(r));
    }
    buffer_.span = libkineto::TraceSpan(first, last, "neuron");
    uint32_t flow = 0;
    for (const auto& [name, start, end, device, resource, correlation, kind, runtime_name, issued, pid, tid] : records) {
      const libkineto::ITraceActivity* op = (linked && correlation != 0) ? linked(static_cast<int32_t>(correlation)) : nullptr;
      if (correlation != 0) {
        // The launch on the op's thread, where the op -> device flow starts (as cudaLaunchKernel's does).
        buffer_.emplace_activity(buffer_.span, libkineto::ActivityType::PRIVATEUSE1_RUNTIME, runtime_name);
        auto& launch = libkineto::CpuTraceBuffer::toRef(buffer_.activities.back());
        launch.startTime = launch.endTime = issued;
        launch.device = pid;
        launch.resource = tid;
        launch.id = static_cast<int32_t>(correlation);
        set_flow(launch, ++flow, true);
        launch.linked = op;
        logger.handleActivity(launch);
      }
      buffer_.emplace_activity(buffer_.span, activity_type(kind), name);
      auto& activity = libkineto::CpuTraceBuffer::toRef(buffer_.activities.back());
      activity.startTime = start;
      activity.endTime = end;
      activity.device = device;
      activity.resource = resource;
      activity.id = static_cast<int32_t>(correlation);
      if (correlation != 0) {
        set_flow(activity, flow, false);  // the flow's device end
        activity.linked = op;  // key_averages() adds its device time to this op
      }
      logger.handleActivity(activity);
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, 0, "neuron", "NeuronCore (simulated)"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> infos;
    for (const auto& [id, device, name] : resources_) infos.push_back({id, id, device, name});
    return infos;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::make_unique<libkineto::CpuTraceBuffer>(std::move(buffer_));
  }

  void pushCorrelationId(uint64_t id) override { push_correlation(id); }
  void popCorrelationId() override { pop_correlation(); }

 private:
  // A Python error becomes a session error (Kineto reports it; the profile goes on without device
  // activities) instead of an exception escaping into Kineto.
  template <typename F>
  void call(const char* what, F&& f) {
    try {
      py::gil_scoped_acquire gil;
      f(py::module_::import(kWindow));
    } catch (const std::exception& e) {
      errors_.push_back(std::string("neuron profiler ") + what + ": " + e.what());
      status_ = libkineto::TraceStatus::ERROR;
    }
  }

  std::string custom_config_;
  int64_t window_ = -1;  // the Python capture window of this session
  std::vector<std::string> errors_;
  std::vector<Resource> resources_;
  libkineto::CpuTraceBuffer buffer_;
};

class NeuronActivityProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return device_activities(); }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& types,
                                                                  const libkineto::Config& config) override {
    // Kineto asks every child profiler; a profile without ProfilerActivity.PrivateUse1 gets no session.
    bool wanted = std::any_of(types.begin(), types.end(), [](auto t) { return device_activities().count(t) > 0; });
    if (!wanted) return nullptr;
    return std::make_unique<NeuronActivityProfilerSession>(config.getCustomConfig());
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                  const std::set<libkineto::ActivityType>& types,
                                                                  const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "neuron";
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

}  // namespace
}  // namespace torch_neuronx::profiler
