// The node agent: keeps one control stream to the coordinator alive (reconnect
// with jittered exponential backoff), advertises its workers, sends heartbeats, keeps its clock
// synchronised (a burst at connect, one every clock_sync_interval, and bursts around every
// capture), and runs the captures the coordinator asks for through its collectors.
//
// Threads: the connection thread (runs one session after another, with backoff), the timer
// thread (heartbeats, periodic clock sync), one thread per capture, and the start timer's
// (which may be shared by several agents of one process). The control stream itself runs on
// gRPC's callback API: messages from the coordinator are handled on gRPC's own threads and
// writes are queued, so a process hosting many agents (the scale benchmark) does not wake a
// thread per agent for every message. Everything else is guarded by mu_.
#pragma once

#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent_clock.h"
#include "agent/capture_run.h"
#include "agent/collector.h"
#include "agent/start_timer.h"
#include "agent/watch/watch_queue.h"
#include "agent/watch/watch_sender.h"
#include "common/tls_files.h"
#include "podscope/v1/agent.grpc.pb.h"

namespace podscope::agent {

struct AgentOptions {
  std::string coordinator = "127.0.0.1:50051";  // HOST:PORT of the coordinator's gRPC port
  std::string agent_id;                         // empty: "<host>-<pid>"
  // Mutual TLS to the coordinator: this agent's certificate and key, and the CA the
  // coordinator's certificate must chain to. All empty: plaintext (--insecure).
  common::TlsFiles tls;
  // The name the coordinator's certificate must hold; empty: the host of `coordinator`.
  std::string tls_server_name;
  std::string host;                               // empty: the machine's hostname
  int clock_burst = 8;                            // exchanges per clock-sync burst
  int64_t heartbeat_interval_ns = 1'000'000'000;  // until the coordinator's welcome says otherwise
  int64_t clock_sync_interval_ns = 10'000'000'000;  // likewise
  int64_t reconnect_initial_ns = 100'000'000;
  int64_t reconnect_max_ns = 5'000'000'000;
  int64_t rpc_timeout_ns = 5'000'000'000;
  // Finished captures are remembered this long and re-reported after a reconnect.
  int64_t keep_finished_ns = 600'000'000'000;
  // capture.start_timer may be shared by the agents of one process; null: the agent's own.
  CaptureRunOptions capture;
  // Watch data: the collectors' step summaries streamed to the coordinator between
  // captures. On by default; --watch=off turns it off.
  bool watch = true;
  WatchQueueLimits watch_queue;
  WatchSenderOptions watch_sender;
  // A sharded coordinator's word on who owns this agent's jobs (in its welcome, and again when
  // they change); called on a gRPC thread, so it must only hand the news on (ShardedAgent).
  std::function<void(const v1::ShardOwners&)> on_shard_owners;
};

class Agent {
 public:
  // `clock` must outlive the agent.
  Agent(AgentOptions options, const AgentClock& clock,
        std::vector<std::unique_ptr<Collector>> collectors);
  ~Agent();

  void Start();
  // Cancels running captures, closes the stream, joins every thread. Idempotent.
  void Stop();
  // The coordinator refused this agent (e.g. another protocol major version); the reason.
  // Empty while not refused. The agent stops trying once refused.
  std::string refusal() const;
  bool connected() const { return connected_.load(); }
  const std::string& agent_id() const { return options_.agent_id; }
  // Blocks until connected (and welcomed) or `timeout_ns` passes.
  bool WaitConnected(int64_t timeout_ns);
  // Whether a capture this agent took part in is still running or uploading.
  bool busy() const;
  // The coordinator shard that welcomed this agent ("" when unsharded or not yet welcomed).
  std::string shard() const;
  // What the watch queue and stream did (zeros with watch off).
  WatchQueueCounters watch_queue_counters() const { return watch_queue_.counters(); }
  WatchSenderCounters watch_sender_counters() const;

 private:
  std::shared_ptr<grpc::ChannelCredentials> Credentials(grpc::ChannelArguments* args) const;
  class ControlStream;

  // Random per process, sent in every hello: the coordinator tells this process reconnecting
  // from another process claiming the same agent id.
  const std::string instance_id_ = NewInstanceId();
  static std::string NewInstanceId();

  void ConnectionLoop();
  bool WaitForCoordinator();
  void TimerLoop();
  // One session: returns when the stream ends. Sets refusal_ on a version refusal.
  void RunSession();
  bool Send(const v1::AgentMessage& message);
  // A message from the coordinator on `stream` (a gRPC thread).
  void OnMessage(ControlStream& stream, const v1::CoordinatorMessage& message);
  // `until`: agent-clock instant by which the burst is over, 0 for none.
  void SyncClockBurst(std::string_view reason, int exchanges, TimeNs until = 0);
  void OnCapture(const v1::CaptureRequest& request);
  void OnCancel(const v1::CancelCapture& cancel);
  // One Upload stream of `chunks`, given up at `deadline` (agent clock; 0: five minutes on).
  absl::StatusOr<v1::UploadResponse> UploadOnce(const std::vector<const std::string*>& chunks,
                                                TimeNs deadline);
  v1::AgentHello Hello();
  void AddWorkers(google::protobuf::RepeatedPtrField<v1::WorkerDescriptor>* out) const;
  // Which collector serves each rank now (probes register and leave at any time).
  std::map<int32_t, Collector*> CollectorsByRank() const;
  void OnWorkersChanged();
  void ForgetOldCaptures();
  // Sleeps up to `ns` unless stopping; false when stopping.
  bool Sleep(int64_t ns);

  AgentOptions options_;
  const AgentClock& clock_;
  std::vector<std::unique_ptr<Collector>> collectors_;
  // A worker-change report against the collectors' teardown.
  absl::Mutex workers_changed_mu_ ABSL_ACQUIRED_BEFORE(write_mu_);
  bool collectors_alive_ ABSL_GUARDED_BY(workers_changed_mu_) = true;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AgentService::Stub> stub_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool sync_wanted_ ABSL_GUARDED_BY(mu_) = false;
  std::string refusal_ ABSL_GUARDED_BY(mu_);
  std::string shard_ ABSL_GUARDED_BY(mu_);
  // The live Connect call, for cancelling.
  grpc::ClientContext* session_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::set<grpc::ClientContext*> uploads_ ABSL_GUARDED_BY(mu_);  // live Upload calls, likewise
  std::map<std::string, std::unique_ptr<CaptureRun>> captures_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, TimeNs> finished_at_ ABSL_GUARDED_BY(mu_);

  absl::Mutex write_mu_;
  ControlStream* stream_ ABSL_GUARDED_BY(write_mu_) = nullptr;  // the welcomed session's stream

  std::atomic<bool> connected_{false};
  std::atomic<bool> welcomed_{false};
  std::atomic<int64_t> heartbeat_interval_ns_;
  std::atomic<int64_t> clock_sync_interval_ns_;
  std::unique_ptr<StartTimer> own_start_timer_;
  WatchQueue watch_queue_;
  std::unique_ptr<WatchSender> watch_sender_;
  std::thread connection_thread_, timer_thread_;
};

}  // namespace podscope::agent
