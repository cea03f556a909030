// The server's accept loop, its thread pools, connection bounds and TLS context. What happens
// on an accepted connection is in http_session.h: a session per connection (plain or TLS, each
// compiled in its own file), which admits each request (request_admission.h), reads its body,
// runs its handler and writes its response.
#include "http/http_server.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "common/str_util.h"
#include "http/connection_limits.h"
#include "http/http_session.h"

namespace podscope::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using sessions::PieceChannel;

namespace {

// At most this many refused connections are answered with a 503 at once; past that they are
// closed at once (each answer holds a socket for a little while).
constexpr int kMaxRefusalsInFlight = 64;

}  // namespace

namespace sessions {

std::unique_ptr<ConnectionHandle::Attachment> ConnectionHandle::Attach(
    std::function<void()> close) {
  absl::MutexLock lock(&mu_);
  if (evicted_) {
    close();
  } else {
    close_ = std::move(close);
  }
  return std::make_unique<Attachment>(*this);
}

void ConnectionHandle::Detach() {
  absl::MutexLock lock(&mu_);
  close_ = nullptr;
}

bool ConnectionHandle::Authenticated(const std::string& principal) {
  if (authenticated_.exchange(true)) return true;
  std::function<void()> evict;
  const bool taken = limits_.Authenticated(id_, principal, &evict);
  if (evict) evict();
  if (on_authenticated_) on_authenticated_(evict != nullptr);
  return taken;
}

void ConnectionHandle::Evict() {
  {
    absl::MutexLock lock(&mu_);
    evicted_ = true;
  }
  asio::post(strand_, [self = shared_from_this()] {
    absl::MutexLock lock(&self->mu_);
    if (self->close_) self->close_();
  });
}

}  // namespace sessions

class HttpServer::Impl {
 public:
  Impl(const Router& router, HttpLimits limits)
      : state_(router, std::move(limits)),
        admission_({.max_total = state_.limits.max_connections,
                    .max_per_client = state_.limits.max_connections_per_client,
                    .max_unauthenticated = state_.limits.max_unauthenticated_connections,
                    .max_unauthenticated_per_client = state_.limits.max_unauthenticated_per_client,
                    .min_eviction_age_ms = state_.limits.min_eviction_age_ms,
                    .proven_for_seconds = state_.limits.proven_client_seconds,
                    .max_per_principal = state_.limits.max_connections_per_token},
                   common::RealTime()) {}

  absl::StatusOr<uint16_t> Start(const std::string& host, uint16_t port) {
    boost::system::error_code ec;
    const asio::ip::address address = asio::ip::make_address(host, ec);
    if (ec)
      return absl::InvalidArgumentError(
          common::StrCat("bad listen address \"", host, "\": ", ec.message()));
    const tcp::endpoint endpoint(address, port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(common::StrCat("cannot listen on ", host, ":", port, ": ",
                                                   ec == asio::error::address_in_use
                                                       ? "another process listens on that port"
                                                       : ec.message()));
    }
    // A descriptor held back for the moment the process runs out: see ShedOneConnection.
    reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const uint16_t bound = acceptor_.local_endpoint().port();
    asio::co_spawn(state_.io, Accept(), asio::detached);
    const HttpLimits& limits = state_.limits;
    for (int i = 0; i < std::max(1, limits.io_threads); ++i) {
      threads_.emplace_back([this] { RunNamed(state_.io, kIoThreadName); });
    }
    for (int i = 0; i < std::max(1, limits.heavy_threads); ++i) {
      heavy_threads_.emplace_back([this] { RunNamed(state_.heavy, kHeavyThreadName); });
    }
    for (int i = 0; i < std::max(1, limits.stream_threads); ++i) {
      heavy_threads_.emplace_back([this] { RunNamed(state_.streams, kStreamThreadName); });
    }
    for (int i = 0; i < std::max(1, limits.forward_threads); ++i) {
      heavy_threads_.emplace_back([this] { RunNamed(state_.forwards, kForwardThreadName); });
    }
    return bound;
  }

  void Stop(int grace_seconds) {
    if (stopped_.exchange(true)) return;
    asio::post(state_.io, [this] {
      boost::system::error_code ignored;
      acceptor_.close(ignored);
    });
    // Let in-flight requests finish, then stop the loop.
    const auto deadline = Clock::now() + std::chrono::seconds(grace_seconds);
    while (state_.in_flight.load() > 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // Producers of streamed bodies wait on the I/O loop: end their streams while it still runs.
    auto streams_done = [this]() ABSL_SHARED_LOCKS_REQUIRED(state_.streams_mu) {
      return state_.open_streams.empty();
    };
    {
      absl::MutexLock lock(&state_.streams_mu);
      for (const std::shared_ptr<PieceChannel>& channel : state_.open_streams) {
        asio::post(state_.io, [channel] { sessions::EndStream(*channel); });
      }
      state_.streams_mu.AwaitWithTimeout(absl::Condition(&streams_done), absl::Seconds(10));
    }
    state_.io.stop();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    heavy_work_.reset();
    state_.heavy.stop();
    stream_work_.reset();
    state_.streams.stop();
    forward_work_.reset();
    state_.forwards.stop();
    for (std::thread& t : heavy_threads_) t.join();
    heavy_threads_.clear();
    if (reserve_fd_ >= 0) ::close(reserve_fd_);
    reserve_fd_ = -1;
  }

  absl::Status LoadTls(const HttpTlsFiles& files) {
    auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
    boost::system::error_code ec;
    context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                             asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                             asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use,
                         ec);
    if (!ec) context->use_certificate_chain_file(files.cert_file, ec);
    if (ec)
      return absl::InvalidArgumentError(
          common::StrCat("--tls-cert ", files.cert_file, ": ", sessions::TlsErrorText(ec)));
    context->use_private_key_file(files.key_file, asio::ssl::context::pem, ec);
    if (ec)
      return absl::InvalidArgumentError(
          common::StrCat("--tls-key ", files.key_file, ": ", sessions::TlsErrorText(ec)));
    // No TLS 1.3 session tickets: podscope's clients make one request per connection and keep
    // no session cache, so a ticket is a wasted write on every connection.
    SSL_CTX_set_num_tickets(context->native_handle(), 0);
    if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
      return absl::InvalidArgumentError(common::StrCat(
          "--tls-key ", files.key_file, " is not the key of the certificate in ", files.cert_file));
    }
    absl::MutexLock lock(&tls_mu_);
    tls_ = std::move(context);
    return absl::OkStatus();
  }

  void set_authorizer(Authorizer* authorizer) { state_.authorizer = authorizer; }
  const HttpCounters& counters() const { return state_.counters; }

 private:
  static void RunNamed(asio::io_context& context, const char* name) {
    pthread_setname_np(pthread_self(), name);
    context.run();
  }

  asio::awaitable<void> Accept() {
    asio::steady_timer backoff(state_.io);
    HttpCounters& counters = state_.counters;
    while (acceptor_.is_open()) {
      // Each connection lives on its own strand: the session coroutine and the stream's timer
      // handlers (a deadline can fire while no operation is pending) never run at once on the
      // two I/O threads. beast::tcp_stream is not thread-safe.
      auto [ec, socket] = co_await acceptor_.async_accept(asio::make_strand(state_.io),
                                                          asio::as_tuple(asio::use_awaitable));
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
        if (ec == asio::error::no_descriptors || ec.value() == ENFILE ||
            ec == asio::error::no_buffer_space || ec == asio::error::no_memory) {
          // Out of descriptors: the pending connection would make accept fail again at once
          // (the loop spun at 93% CPU). Take it off the queue with the reserve descriptor and
          // wait a little for descriptors to come back.
          ++counters.rejected_no_descriptors;
          state_.log.Warn("http: cannot accept ({}): shedding a connection and backing off",
                          ec.message());
          ShedOneConnection();
          backoff.expires_after(std::chrono::milliseconds(50));
          co_await backoff.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        continue;
      }
      boost::system::error_code peer_ec;
      const tcp::endpoint remote = socket.remote_endpoint(peer_ec);
      if (peer_ec) continue;  // gone already
      // A response goes out in several writes (a TLS record each): with Nagle on, each one after
      // the first waits for the client's delayed ACK, 40 ms a request.
      socket.set_option(tcp::no_delay(true), peer_ec);
      std::string client = remote.address().to_string();
      auto executor = socket.get_executor();
      auto handle = std::make_shared<sessions::ConnectionHandle>(
          executor, admission_, [this](bool dropped_one) {
            state_.counters.unauthenticated_connections = admission_.unauthenticated();
            if (dropped_one) ++state_.counters.evicted_idle;
          });
      ConnectionLimits::Admission admission =
          admission_.TryAdmit(client, [handle] { handle->Evict(); });
      if (admission.evict) {
        ++(admission.dropped == ConnectionLimits::Dropped::kIdle
               ? counters.evicted_idle
               : counters.evicted_unauthenticated);
        admission.evict();
      }
      const ConnectionLimits::Verdict verdict = admission.verdict;
      if (verdict == ConnectionLimits::Verdict::kAdmitted) {
        counters.open_connections = admission_.open();
        counters.unauthenticated_connections = admission_.unauthenticated();
        handle->set_id(admission.id);
        asio::co_spawn(executor,
                       Session(std::move(socket), std::move(client), remote.port(), admission.id,
                               std::move(handle)),
                       asio::detached);
        continue;
      }
      const bool server_full = verdict == ConnectionLimits::Verdict::kServerFull;
      ++(server_full ? counters.rejected_server_full : counters.rejected_client_full);
      const std::string detail =
          !server_full
              ? common::StrCat("this client holds its limit of ",
                               state_.limits.max_connections_per_client, " connections, or of ",
                               state_.limits.max_unauthenticated_per_client,
                               " that have not authenticated, none of them old enough to give way")
          : admission.unauthenticated_full
              ? common::StrCat("the server holds its limit of ",
                               state_.limits.max_unauthenticated_connections,
                               " connections that have not authenticated, none of them old enough "
                               "to give way")
              : common::StrCat("the server holds its limit of ", state_.limits.max_connections,
                               " connections");
      state_.log.Warn("http: refused a connection from {}: {}", client, detail);
      if (refusals_in_flight_ < kMaxRefusalsInFlight) {
        ++refusals_in_flight_;
        asio::co_spawn(executor, Refuse(std::move(socket), detail), asio::detached);
      }
    }
  }

  // Accepts and closes one pending connection using the reserve descriptor.
  void ShedOneConnection() {
    if (reserve_fd_ < 0) return;
    ::close(reserve_fd_);
    const int fd = ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) ::close(fd);
    reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }

  asio::awaitable<void> Refuse(tcp::socket socket, std::string detail) {
    const std::shared_ptr<asio::ssl::context> tls = CurrentTls();
    if (tls == nullptr) {
      co_await sessions::RefusePlain(std::move(socket), std::move(detail));
    } else {
      co_await sessions::RefuseTls(std::move(socket), tls, std::move(detail));
    }
    --refusals_in_flight_;
  }

  asio::awaitable<void> Session(tcp::socket socket, std::string client, uint16_t client_port,
                                uint64_t id, std::shared_ptr<sessions::ConnectionHandle> handle) {
    std::string peer = common::StrCat(client, ":", client_port);
    const std::shared_ptr<asio::ssl::context> tls = CurrentTls();
    if (tls == nullptr) {
      co_await sessions::ServePlain(state_, std::move(socket), std::move(peer), handle);
    } else {
      co_await sessions::ServeTls(state_, std::move(socket), tls, std::move(peer), handle);
    }
    admission_.Release(id);
    state_.counters.open_connections = admission_.open();
    state_.counters.unauthenticated_connections = admission_.unauthenticated();
  }

  // The TLS context new connections use (replaced whole by LoadTls); null: plain HTTP.
  std::shared_ptr<asio::ssl::context> CurrentTls() {
    absl::MutexLock lock(&tls_mu_);
    return tls_;
  }

  sessions::ServerState state_;
  ConnectionLimits admission_;
  tcp::acceptor acceptor_{state_.io};
  asio::executor_work_guard<asio::io_context::executor_type> heavy_work_ =
      asio::make_work_guard(state_.heavy);
  asio::executor_work_guard<asio::io_context::executor_type> stream_work_ =
      asio::make_work_guard(state_.streams);
  asio::executor_work_guard<asio::io_context::executor_type> forward_work_ =
      asio::make_work_guard(state_.forwards);
  std::vector<std::thread> threads_;
  std::vector<std::thread> heavy_threads_;
  std::atomic<bool> stopped_{false};
  std::atomic<int> refusals_in_flight_{0};
  int reserve_fd_ = -1;  // touched only by the accept loop (one coroutine) and Start/Stop
  absl::Mutex tls_mu_;
  std::shared_ptr<asio::ssl::context> tls_ ABSL_GUARDED_BY(tls_mu_);
};

HttpServer::HttpServer(const Router& router, HttpLimits limits)
    : impl_(std::make_unique<Impl>(router, std::move(limits))) {}
HttpServer::~HttpServer() { impl_->Stop(0); }
absl::StatusOr<uint16_t> HttpServer::Start(const std::string& host, uint16_t port) {
  return impl_->Start(host, port);
}
absl::Status HttpServer::EnableTls(const HttpTlsFiles& files) { return impl_->LoadTls(files); }
void HttpServer::set_authorizer(Authorizer* authorizer) { impl_->set_authorizer(authorizer); }
void HttpServer::Stop(int grace_seconds) { impl_->Stop(grace_seconds); }
const HttpCounters& HttpServer::counters() const { return impl_->counters(); }

}  // namespace podscope::http
