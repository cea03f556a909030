// The probe inside one training process: who it is, its link to the agent, its event sources
// and the one capture window it can be recording at a time.
//
// Threads: the link's (socket I/O) and the window thread, which sleeps until an armed window's
// start on the host clock, opens every source, sends what they recorded every stream interval
// until the stop (or a cancel), closes them, waits a short grace for in-flight kernel events,
// harvests the rest, links NCCL's collectives to the kernels of the whole window, encodes the
// events as columnar chunks numbered on from those sent and queues them for the agent, then
// the window's status. Neither thread is ever one of the training process's.
//
// Watch data (docs/watch.md): a third thread flushes the watch sources every interval and sends
// what they hold as one ProbeWatch message, while the agent it is connected to asked for watch data
// (its welcome) and PODSCOPE_WATCH is not 0. Not connected, the sources are told to stop, so a
// probe without an agent asks NCCL for nothing between windows.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/probe/agent_socket_client.h"
#include "agent/probe/collective_links.h"
#include "agent/probe/device_catalog.h"
#include "agent/probe/event_source.h"
#include "agent/probe/probe_identity.h"
#include "agent/probe/probe_settings.h"

namespace podscope::agent::probe {

struct ProbeDescription {
  ProbeIdentity identity;
  int64_t pid = 0;
  std::vector<int64_t> ppid_chain;
  std::string device;
  std::string process_name;  // /proc/self/comm, e.g. "python3"
  std::vector<std::string> features;
  std::string warnings;
};

class ProbeRuntime : public AgentSocketClient::Handler {
 public:
  // `sources` must outlive the runtime. `host_now` null: CLOCK_REALTIME.
  ProbeRuntime(ProbeSettings settings, ProbeDescription description,
               std::vector<EventSource*> sources, TimeNs (*host_now)() = nullptr);
  ~ProbeRuntime() override;

  void Start();
  void Stop();

  void AddSource(EventSource* source);
  // Also watched between windows (a source may be both).
  void AddWatchSource(WatchSource* source);
  // Reads a (GPU, host) clock pair for watch data's kernel times (CUPTI's timestamp, once
  // CUPTI loaded); without one the GPU clock is taken as the host's.
  void SetClockReader(std::function<void(GpuClockMap*)> reader);
  // Describes the GPUs (by CUPTI device id) a window's kernels ran on; each id is asked once.
  void SetDeviceDescriber(DeviceDescriber describer);
  // Sends what the watch sources hold now; the watch thread calls it every interval. False when
  // there was nothing, or the link did not take it.
  bool FlushWatch();
  // What loaded, and what did not; an agent already connected hears it at once.
  void AddFeature(const std::string& feature);
  void AddWarning(const std::string& warning);

  // AgentSocketClient::Handler (the link's thread).
  v1::ProbeRegister Registration() override;
  void OnArm(const v1::ProbeArm& arm) override;
  void OnCancel(const v1::ProbeCancel& cancel) override;
  void OnRefused(const std::string& reason) override;
  void OnWelcome(const v1::ProbeWelcome& welcome) override;
  void OnDisconnected() override;

  const AgentSocketClient& agent_client() const { return agent_client_; }
  // Windows finished (delivered or not) since Start.
  uint64_t windows_done() const;
  GpuClockMap& gpu_clock() { return gpu_clock_; }

 private:
  struct Window {
    v1::ProbeArm arm;
    bool cancelled = false;
    // Armed again while recording (the agent restarted, or the probe reconnected): what the
    // window streamed goes again, as the agent may have lost it.
    bool resend = false;
  };
  void WindowLoop();
  void WatchLoop();
  void SetWatching(bool on);
  // Sleeps until `deadline` (host clock) or until the window is cancelled / the runtime stops.
  bool SleepUntil(TimeNs deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Record(const v1::ProbeArm& arm) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What one window has sent the agent so far.
  struct WindowOutput {
    std::string capture_id;
    common::WorkerInfo info;
    DeviceDescriber describer;
    std::vector<CommKernelRef> comm_kernels;  // of every piece sent, for linking collectives
    // The chunks sent while the window ran, with their event counts, kept (encoded, far smaller
    // than the events) until its end for an agent that asks again.
    std::vector<std::pair<v1::ProbeMessage, uint64_t>> streamed;
    uint64_t events = 0, dropped = 0, chunks = 0;
    std::map<std::string, uint64_t> dropped_reasons;  // part of dropped
  };
  // Encodes the harvests' events as chunks, numbered on from what the window sent, and queues
  // them for the agent (the window thread, without mu_); `keep`: also into out->streamed.
  void Send(std::vector<Harvest>& harvests, bool keep, WindowOutput* out);
  // Whether the window was armed again since the last look (then what it streamed is sent again,
  // by Resend, outside mu_: the link's thread takes mu_ in OnArm).
  bool ArmedAgain() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Resend(WindowOutput* out);
  void SendStatus(const v1::ProbeCaptureStatus& status);
  // Sends the registration again when what it says changed while connected.
  void Reregister();

  const ProbeSettings settings_;
  TimeNs (*host_now_)();
  AgentSocketClient agent_client_;
  GpuClockMap gpu_clock_;
  EventBudget budget_;

  mutable absl::Mutex mu_;
  ProbeDescription description_ ABSL_GUARDED_BY(mu_);
  std::vector<EventSource*> sources_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Window> window_ ABSL_GUARDED_BY(mu_);  // armed or recording; null when idle
  std::string recording_ ABSL_GUARDED_BY(mu_);           // the capture being recorded, if any
  // The last capture delivered (a repeated arm is answered, not re-run).
  std::string last_done_ ABSL_GUARDED_BY(mu_);
  uint64_t windows_done_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;

  std::vector<WatchSource*> watch_sources_ ABSL_GUARDED_BY(mu_);
  bool watching_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void(GpuClockMap*)> clock_reader_ ABSL_GUARDED_BY(mu_);
  DeviceDescriber device_describer_ ABSL_GUARDED_BY(mu_);
  DeviceCatalog devices_;  // the window thread's
  GpuClockMap watch_clock_;
  absl::Mutex flush_mu_;  // one flush at a time
  std::thread watch_thread_;
};

// The description of this process: pid, parents, identity from the environment.
ProbeDescription DescribeThisProcess();

}  // namespace podscope::agent::probe
