// Streams the agent's watch queue to the coordinator (agent.proto's Watch call): one long stream
// while the agent holds its control stream, a batch each flush interval (or sooner when a
// batch's worth is queued). Writes block under gRPC's flow control when the coordinator falls
// behind, and then the queue's bound drops the oldest: backpressure with a bound at every hop.
// A broken stream is reopened with backoff; the batch it held is counted as lost.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/watch/watch_queue.h"
#include "podscope/v1/agent.grpc.pb.h"

namespace podscope::agent {

struct WatchSenderOptions {
  absl::Duration flush_interval = absl::Seconds(1);
  size_t max_batch_steps = 1'024;
  absl::Duration reconnect_initial = absl::Milliseconds(200);
  absl::Duration reconnect_max = absl::Seconds(5);
};

struct WatchSenderCounters {
  uint64_t batches = 0;
  uint64_t steps = 0;
  uint64_t streams_opened = 0;
  uint64_t streams_failed = 0;
};

class WatchSender {
 public:
  // `ready` says when the coordinator will hear this agent (its control stream is welcomed);
  // the stub and queue outlive the sender.
  WatchSender(WatchSenderOptions options, std::string agent_id, v1::AgentService::Stub* stub,
              WatchQueue& queue, std::function<bool()> ready);
  ~WatchSender();

  void Start();
  // Cancels the stream in flight and joins. Idempotent.
  void Stop();
  WatchSenderCounters counters() const;

 private:
  void Loop();
  // Waits `d` unless stopping; false when stopping.
  bool Pause(absl::Duration d);

  const WatchSenderOptions options_;
  const std::string agent_id_;
  v1::AgentService::Stub* const stub_;
  WatchQueue& queue_;
  const std::function<bool()> ready_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* stream_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  WatchSenderCounters counters_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace podscope::agent
