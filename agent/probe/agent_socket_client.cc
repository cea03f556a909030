#include "agent/probe/agent_socket_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "common/frame_codec.h"

namespace podscope::agent::probe {

namespace {

constexpr size_t kMaxControlFrames = 1024;
constexpr int64_t kQuickRetryNs = 200'000'000;  // first retry after losing a live agent

int64_t MonotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

AgentSocketClient::AgentSocketClient(std::string socket_path, int64_t reconnect_interval_ns,
                                     size_t max_queue_bytes, Handler* handler)
    : socket_path_(std::move(socket_path)),
      reconnect_interval_ns_(reconnect_interval_ns),
      max_queue_bytes_(max_queue_bytes),
      handler_(handler) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

AgentSocketClient::~AgentSocketClient() {
  Stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void AgentSocketClient::Start() {
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void AgentSocketClient::Stop() {
  stopping_ = true;
  Wake();
  if (thread_.joinable()) thread_.join();
}

void AgentSocketClient::Wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(wake_fd_, &one, sizeof(one));
}

size_t AgentSocketClient::queued_bytes() const {
  absl::MutexLock lock(&mu_);
  return queued_bytes_;
}

bool AgentSocketClient::Send(const v1::ProbeMessage& message, bool control) {
  std::string frame;
  if (!common::AppendFrame(message.SerializeAsString(), kMaxProbeFrameBytes, &frame).ok()) {
    dropped_.fetch_add(1);
    return false;
  }
  {
    absl::MutexLock lock(&mu_);
    const bool fits = control ? control_frames_ < kMaxControlFrames
                              : queued_bytes_ + frame.size() <= max_queue_bytes_;
    if (!fits || refused_) {
      dropped_.fetch_add(1);
      return false;
    }
    if (control) ++control_frames_;
    queued_bytes_ += frame.size();
    queue_.push_back(Frame{std::move(frame), control});
  }
  Wake();
  return true;
}

void AgentSocketClient::Loop() {
  int64_t next_attempt = 0;
  while (!stopping_) {
    const int64_t now = MonotonicNs();
    if (now >= next_attempt) {
      absl::StatusOr<common::UniqueFd> fd = common::ConnectUnix(socket_path_);
      if (fd.ok()) {
        connections_.fetch_add(1);
        Serve(*std::move(fd));
        handler_->OnDisconnected();
        if (stopping_) break;
        next_attempt = MonotonicNs() + std::min(kQuickRetryNs, reconnect_interval_ns_);
        absl::MutexLock lock(&mu_);
        if (refused_) next_attempt = INT64_MAX;
        continue;
      }
      next_attempt = now + reconnect_interval_ns_;
    }
    // Sleep until the next attempt or a Stop (the eventfd also carries Send's wake-ups, which
    // have nothing to do while disconnected).
    pollfd p{wake_fd_, POLLIN, 0};
    const int64_t wait_ms =
        std::min<int64_t>((next_attempt - MonotonicNs()) / 1'000'000 + 1, 60'000);
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(wait_ms, 0))) > 0) {
      uint64_t drained = 0;
      [[maybe_unused]] const ssize_t n = read(wake_fd_, &drained, sizeof(drained));
    }
  }
}

void AgentSocketClient::Serve(common::UniqueFd fd) {
  fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
  // Connected before the registration is taken: a change to it made after this (a feature
  // NCCL's init adds) sees a connected link and is sent again; one made before is in it.
  connected_ = true;
  {
    // Registration goes first; a frame half-written to the previous agent starts over.
    v1::ProbeMessage hello;
    *hello.mutable_register_() = handler_->Registration();
    std::string frame;
    (void)common::AppendFrame(hello.SerializeAsString(), kMaxProbeFrameBytes, &frame);
    absl::MutexLock lock(&mu_);
    front_written_ = 0;
    queued_bytes_ += frame.size();
    ++control_frames_;
    queue_.push_front(Frame{std::move(frame), true});
  }
  common::FrameReader reader(kMaxAgentFrameBytes);
  char buffer[64 * 1024];
  bool broken = false;
  while (!stopping_ && !broken) {
    bool want_write = false;
    {
      absl::MutexLock lock(&mu_);
      want_write = !queue_.empty();
    }
    pollfd p[2] = {{fd.get(), static_cast<short>(POLLIN | (want_write ? POLLOUT : 0)), 0},
                   {wake_fd_, POLLIN, 0}};
    if (poll(p, 2, 1000) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[1].revents & POLLIN) {
      uint64_t drained = 0;
      [[maybe_unused]] const ssize_t n = read(wake_fd_, &drained, sizeof(drained));
    }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = read(fd.get(), buffer, sizeof(buffer));
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        broken = true;
        break;
      }
      if (n > 0) reader.Append(std::string_view(buffer, static_cast<size_t>(n)));
      while (true) {
        absl::StatusOr<std::optional<std::string>> frame = reader.Next();
        if (!frame.ok()) {
          broken = true;  // a frame over the bound: the stream cannot be trusted any more
          break;
        }
        if (!frame->has_value()) break;
        v1::AgentToProbe command;
        if (!command.ParseFromString(**frame)) continue;
        if (command.has_welcome()) {
          handler_->OnWelcome(command.welcome());
        } else if (command.has_arm()) {
          handler_->OnArm(command.arm());
        } else if (command.has_cancel()) {
          handler_->OnCancel(command.cancel());
        } else if (command.has_refused()) {
          {
            absl::MutexLock lock(&mu_);
            refused_ = true;
            queue_.clear();
            queued_bytes_ = 0;
            control_frames_ = 0;
          }
          handler_->OnRefused(command.refused().reason());
          broken = true;
          break;
        }
      }
    }
    // Write as much of the queue as the socket takes.
    while (!broken) {
      absl::MutexLock lock(&mu_);
      if (queue_.empty()) break;
      const std::string& front = queue_.front().bytes;
      const ssize_t n = send(fd.get(), front.data() + front_written_, front.size() - front_written_,
                             MSG_NOSIGNAL);
      if (n < 0) {
        if (errno != EAGAIN && errno != EINTR) broken = true;
        break;
      }
      front_written_ += static_cast<size_t>(n);
      if (front_written_ < front.size()) break;
      queued_bytes_ -= front.size();
      if (queue_.front().control) --control_frames_;
      queue_.pop_front();
      front_written_ = 0;
    }
  }
  connected_ = false;
  absl::MutexLock lock(&mu_);
  // The registration is per connection: if it never went out whole, the next one sends its own.
  front_written_ = 0;
}

}  // namespace podscope::agent::probe
