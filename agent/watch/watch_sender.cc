#include "agent/watch/watch_sender.h"

#include <algorithm>

#include "spdlog/spdlog.h"

namespace podscope::agent {

WatchSender::WatchSender(WatchSenderOptions options, std::string agent_id,
                         v1::AgentService::Stub* stub, WatchQueue& queue,
                         std::function<bool()> ready)
    : options_(options),
      agent_id_(std::move(agent_id)),
      stub_(stub),
      queue_(queue),
      ready_(std::move(ready)) {}

WatchSender::~WatchSender() { Stop(); }

void WatchSender::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void WatchSender::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (stream_context_ != nullptr) stream_context_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

WatchSenderCounters WatchSender::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

bool WatchSender::Pause(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), d);
  return !stopping_;
}

void WatchSender::Loop() {
  absl::Duration backoff = options_.reconnect_initial;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    // The coordinator takes watch data only from an agent holding its control stream.
    if (!ready_()) {
      if (!Pause(absl::Milliseconds(200))) return;
      continue;
    }
    grpc::ClientContext context;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stream_context_ = &context;
      ++counters_.streams_opened;
    }
    v1::WatchAck ack;
    std::unique_ptr<grpc::ClientWriter<v1::WatchBatch>> writer = stub_->Watch(&context, &ack);
    bool broke = false;
    bool delivered_any = false;
    while (true) {
      // A batch a flush interval, or at once while a batch's worth or more is queued.
      if (queue_.queued_steps() < options_.max_batch_steps && !Pause(options_.flush_interval))
        break;
      v1::WatchBatch batch = queue_.Take(agent_id_, options_.max_batch_steps);
      if (batch.steps_size() == 0 && batch.progress_size() == 0) {
        if (!ready_()) break;  // the control stream went: so does this one
        continue;
      }
      if (!writer->Write(batch)) {
        queue_.Lost(batch);
        broke = true;
        break;
      }
      delivered_any = true;
      absl::MutexLock lock(&mu_);
      ++counters_.batches;
      counters_.steps += static_cast<uint64_t>(batch.steps_size());
    }
    if (!broke) writer->WritesDone();
    const grpc::Status status = writer->Finish();
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      stream_context_ = nullptr;
      stopping = stopping_;
      if (broke) ++counters_.streams_failed;
    }
    if (stopping) return;
    if (broke || !status.ok()) {
      spdlog::warn("agent {}: watch stream ended: {} ({}); reopening", agent_id_,
                   status.ok() ? "write failed" : status.error_message(),
                   static_cast<int>(status.error_code()));
    }
    if (delivered_any) backoff = options_.reconnect_initial;
    if (!Pause(backoff)) return;
    backoff = std::min(backoff * 2, options_.reconnect_max);
  }
}

}  // namespace podscope::agent
