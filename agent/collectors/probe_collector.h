// The workers of this node that run with libpodscope_probe.so: every training process
// whose probe registered on the agent's socket is a worker, named by the rank its launcher gave
// it. A capture arms each probe with the window on the host clock; the probe records by itself
// and streams its chunks and a status back, which Drain hands to the capture runner, together
// with the host collector's samples for that worker.
//
// Watch data: while StartWatch holds a sink, every probe is told so in its welcome and
// flushes its collectives and step marks every second; a StepAssembler per probe makes them
// into step summaries for the sink, and quiet communicators' progress goes on as it is.
//
// Restarts: a probe keeps recording through an agent restart and re-registers with the new
// agent, naming the window under way; chunks that arrive before the new agent knows the capture
// wait in a bounded unclaimed store and are claimed when the capture is armed again.
//
// Process identity: the agent reads a worker's /proc entries (its CPU, its ancestors) only under
// the pid the kernel gave for the socket's peer (SO_PEERCRED), which is a pid of the agent's PID
// namespace; the deployments give the agent a proc root of that same namespace (the node's). A
// probe in a PID namespace the agent cannot see has pid 0 there: it is named by the pid it
// reports, which in the node's /proc is some other process, so nothing of it is read there: no
// CPU of its own, and children are told from workers by their rank alone.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent_clock.h"
#include "agent/collector.h"
#include "agent/host/host_sampler.h"
#include "agent/probe_server/probe_server.h"
#include "agent/watch/step_assembler.h"

namespace podscope::agent {

struct ProbeCollectorOptions {
  ProbeServerOptions server;
  // How long Drain waits past the window's end for a probe's status.
  int64_t drain_timeout_ns = 30'000'000'000;
  // Chunks of captures the agent does not know (yet), all probes together.
  size_t max_unclaimed_bytes = 256u << 20;
  // Bytes of chunks one worker may send for one capture.
  size_t max_worker_bytes = 1u << 30;
  std::string host;
  // Where the workers' ancestry is read (which worker a process was started by).
  std::string proc_root = "/proc";
};

class ProbeCollector : public Collector, private ProbeServer::Listener {
 public:
  // Listens on options.server.socket_path. `sampler` may be null (no host samples).
  static absl::StatusOr<std::unique_ptr<ProbeCollector>> Start(
      ProbeCollectorOptions options, const AgentClock& clock,
      std::unique_ptr<host::HostSampler> sampler);
  ~ProbeCollector() override;

  std::string_view name() const override { return "probe"; }
  std::vector<WorkerIdentity> Workers() const override;
  void SetWorkersChangedCallback(std::function<void()> callback) override;
  absl::Status Arm(const CaptureWindow& window) override;
  absl::Status Start(std::string_view capture_id) override;
  absl::Status Stop(std::string_view capture_id) override;
  absl::StatusOr<std::vector<common::WorkerTrace>> TakeRecorded(std::string_view capture_id,
                                                                int32_t rank) override;
  absl::StatusOr<CollectedWorker> Drain(std::string_view capture_id, int32_t rank) override;
  void Forget(std::string_view capture_id) override;
  void StartWatch(WatchSink* sink) override;
  void StopWatch() override;

  const std::string& socket_path() const { return server_->socket_path(); }
  // Probes registered now, served or not (a duplicate rank, a child of a worker).
  size_t probes() const;
  // Results of captures not armed here yet, complete with their status, waiting to be claimed.
  size_t unclaimed_results() const;

 private:
  struct Probe {
    common::PeerCredentials peer;
    v1::ProbeRegister registration;
    // Its process's ancestors (parent first) as the proc root says; empty when the kernel gave
    // no pid for it or its stat could not be read.
    std::vector<int64_t> ancestors;
    int32_t rank = -1;    // as served; -1: not served (a duplicate or a child of a worker)
    std::string ignored;  // why it is not served
    std::unique_ptr<StepAssembler> steps;  // watch data, once some came
    uint64_t watch_lost = 0;               // collectives the probe said it lost, as last logged
    uint64_t watch_refused = 0;            // its records that broke a bound (probe_watch.h)
  };
  struct WorkerCapture {
    ProbeConnectionId probe = 0;
    std::vector<common::WorkerTrace> pieces;  // not yet handed over
    // What the probe says of its process, from its highest-numbered chunk (a probe streaming
    // its window names the devices seen so far): every piece handed over carries it.
    std::optional<common::WorkerInfo> info;
    uint64_t info_sequence = 0;
    // Chunks already taken in: a probe re-armed mid-window (it reconnected) sends again what it
    // streamed, for an agent that may have lost it.
    std::set<uint64_t> sequences;
    uint64_t events = 0;  // in the chunks taken in
    size_t bytes = 0;
    std::optional<v1::ProbeCaptureStatus> status;
    std::string error;  // the agent's own finding (no probe, decode failure, over the bound)
  };
  struct Capture {
    CaptureWindow window;
    bool sampling = false;
    std::map<int32_t, WorkerCapture> workers;
  };
  struct Unclaimed {
    std::string capture_id;
    int64_t process = 0;  // ProcessKeyOf its probe
    int64_t pid = 0;      // as logged
    std::vector<v1::TraceChunk> chunks;
    std::optional<v1::ProbeCaptureStatus> status;
    size_t bytes = 0;
  };

  ProbeCollector(ProbeCollectorOptions options, const AgentClock& clock,
                 std::unique_ptr<host::HostSampler> sampler);

  // ProbeServer::Listener (the server's thread).
  void OnRegister(ProbeConnectionId id, const common::PeerCredentials& peer,
                  const v1::ProbeRegister& r) override;
  void OnChunk(ProbeConnectionId id, v1::TraceChunk&& chunk) override;
  void OnStatus(ProbeConnectionId id, const v1::ProbeCaptureStatus& status) override;
  void OnDisconnect(ProbeConnectionId id) override;
  void OnWatch(ProbeConnectionId id, const v1::ProbeWatch& watch) override;
  v1::AgentToProbe Welcome() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Gives ranks to probes that registered without one, and decides duplicates.
  void AssignRanks() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ProbeConnectionId ProbeOfRank(int32_t rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddChunk(WorkerCapture& w, v1::TraceChunk&& chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives every piece of `rank` (of process `pid`) the same description, what the probe said
  // of its process and what the agent knows of the worker, and moves it onto the agent's clock.
  void Describe(int32_t rank, int64_t pid, common::WorkerInfo info,
                std::vector<common::WorkerTrace>* pieces) const ABSL_LOCKS_EXCLUDED(mu_);
  void NotifyWorkersChanged();

  const ProbeCollectorOptions options_;
  const AgentClock& clock_;
  std::unique_ptr<host::HostSampler> sampler_;
  std::unique_ptr<ProbeServer> server_;

  mutable absl::Mutex mu_;
  std::map<ProbeConnectionId, Probe> probes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Capture, std::less<>> captures_ ABSL_GUARDED_BY(mu_);
  std::vector<Unclaimed> unclaimed_ ABSL_GUARDED_BY(mu_);  // oldest first
  size_t unclaimed_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> workers_changed_ ABSL_GUARDED_BY(mu_);
  WatchSink* watch_sink_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool said_foreign_pid_ ABSL_GUARDED_BY(mu_) = false;  // the log says it once
};

}  // namespace podscope::agent
