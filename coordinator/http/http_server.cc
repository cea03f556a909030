#include "coordinator/http/http_server.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/str_util.h"
#include "coordinator/http/connection_limits.h"
#include "coordinator/http/progress_deadline.h"
#include "coordinator/http/rate_limited_log.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

namespace {

// At most this many refused connections are answered with a 503 at once; past that they are
// closed at once (each answer holds a socket for up to kLingerTime).
constexpr int kMaxRefusalsInFlight = 64;
// After an error response the client may still be sending its request: read and drop up to
// this much, for up to this long, before closing, so that the close does not reset the
// connection under the response the client has yet to read (a client sending a large upload
// after its 413 still gets a reset, but only past this much).
constexpr size_t kLingerBytes = 16 << 20;
constexpr auto kLingerTime = std::chrono::seconds(2);
// A streamed body travels in pieces of at most this size, and at most kStreamPiecesQueued wait
// per connection: what a slow reader pins is about a megabyte, whatever the body's size.
constexpr size_t kStreamPieceBytes = 256 << 10;
constexpr size_t kStreamPiecesQueued = 4;

// Pieces of a streamed body, from the producer's thread to the session's coroutine. An empty
// piece with no error ends the body; an error ends it short.
using PieceChannel =
    asio::experimental::concurrent_channel<void(boost::system::error_code, std::string)>;

// "application/json", whatever its case and parameters ("; charset=utf-8").
bool IsJsonMediaType(std::string_view content_type) {
  std::string type(content_type.substr(0, content_type.find(';')));
  while (!type.empty() && type.back() == ' ') type.pop_back();
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return type == "application/json";
}

// An error of the request's syntax (as opposed to the peer going away mid-header).
bool IsMalformedRequest(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_version).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

// Whether an operation failed because its deadline passed. beast::tcp_stream reports its own
// timeout as error::timeout, but composed HTTP operations can see the cancellation it causes
// as operation_aborted instead; the clock settles it.
bool TimedOut(const beast::error_code& ec, Clock::time_point deadline) {
  return ec == beast::error::timeout ||
         (ec == asio::error::operation_aborted && Clock::now() >= deadline);
}

// Every answer: never sniffed into another type, and (unless it says otherwise, as the web UI's
// pages do) a document that runs nothing if a browser is led to open it, so that a trace's names
// in a JSON or text answer can never act as a page on this origin, where the UI keeps its token.
template <class Message>
void SetSafetyHeaders(Message& out, const HttpResponse& response) {
  out.set("X-Content-Type-Options", "nosniff");
  for (const auto& [name, value] : response.headers) {
    if (beast::iequals(name, "Content-Security-Policy")) return;
  }
  out.set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; sandbox");
}

http::response<http::string_body> ToMessage(HttpResponse response, unsigned version,
                                            bool keep_alive) {
  http::response<http::string_body> out{static_cast<http::status>(response.status), version};
  out.set(http::field::server, "podscope");
  SetSafetyHeaders(out, response);
  if (!response.content_type.empty())
    out.set(http::field::content_type, response.content_type);  // not on a 304
  for (const auto& [name, value] : response.headers) out.set(name, value);
  out.body() = std::move(response.body);
  out.keep_alive(keep_alive);
  out.prepare_payload();
  return out;
}

}  // namespace

class HttpServer::Impl {
 public:
  Impl(const Router& router, HttpLimits limits)
      : router_(router),
        limits_(std::move(limits)),
        admission_(limits_.max_connections, limits_.max_connections_per_client) {}

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
      return absl::UnavailableError(
          common::StrCat("cannot listen on ", host, ":", port, ": ", ec.message()));
    }
    // A descriptor held back for the moment the process runs out: see ShedOneConnection.
    reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const uint16_t bound = acceptor_.local_endpoint().port();
    asio::co_spawn(io_, Accept(), asio::detached);
    for (int i = 0; i < std::max(1, limits_.io_threads); ++i) {
      threads_.emplace_back([this] { RunNamed(io_, kIoThreadName); });
    }
    for (int i = 0; i < std::max(1, limits_.heavy_threads); ++i) {
      heavy_threads_.emplace_back([this] { RunNamed(heavy_, kHeavyThreadName); });
    }
    for (int i = 0; i < std::max(1, limits_.stream_threads); ++i) {
      heavy_threads_.emplace_back([this] { RunNamed(streams_, kStreamThreadName); });
    }
    for (int i = 0; i < std::max(1, limits_.forward_threads); ++i) {
      heavy_threads_.emplace_back([this] { RunNamed(forwards_, kForwardThreadName); });
    }
    return bound;
  }

  void Stop(int grace_seconds) {
    if (stopped_.exchange(true)) return;
    asio::post(io_, [this] {
      boost::system::error_code ignored;
      acceptor_.close(ignored);
    });
    // Let in-flight requests finish, then stop the loop.
    const auto deadline = Clock::now() + std::chrono::seconds(grace_seconds);
    while (in_flight_.load() > 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // Producers of streamed bodies wait on the I/O loop: end their streams while it still runs.
    auto streams_done = [this]() ABSL_SHARED_LOCKS_REQUIRED(streams_mu_) {
      return open_streams_.empty();
    };
    {
      absl::MutexLock lock(&streams_mu_);
      for (const std::shared_ptr<PieceChannel>& channel : open_streams_) {
        asio::post(io_, [channel] { channel->close(); });
      }
      streams_mu_.AwaitWithTimeout(absl::Condition(&streams_done), absl::Seconds(10));
    }
    io_.stop();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    heavy_work_.reset();
    heavy_.stop();
    stream_work_.reset();
    streams_.stop();
    forward_work_.reset();
    forwards_.stop();
    for (std::thread& t : heavy_threads_) t.join();
    heavy_threads_.clear();
    if (reserve_fd_ >= 0) ::close(reserve_fd_);
    reserve_fd_ = -1;
  }

  HttpCounters counters;
  Authorizer* authorizer_ = nullptr;

 private:
  static void RunNamed(asio::io_context& context, const char* name) {
    pthread_setname_np(pthread_self(), name);
    context.run();
  }

  asio::awaitable<void> Accept() {
    asio::steady_timer backoff(io_);
    while (acceptor_.is_open()) {
      // Each connection lives on its own strand: the session coroutine and the stream's timer
      // handlers (a deadline can fire while no operation is pending) never run at once on the
      // two I/O threads. beast::tcp_stream is not thread-safe.
      auto [ec, socket] = co_await acceptor_.async_accept(asio::make_strand(io_),
                                                          asio::as_tuple(asio::use_awaitable));
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
        if (ec == asio::error::no_descriptors || ec.value() == ENFILE ||
            ec == asio::error::no_buffer_space || ec == asio::error::no_memory) {
          // Out of descriptors: the pending connection would make accept fail again at once
          // (the loop spun at 93% CPU). Take it off the queue with the reserve descriptor and
          // wait a little for descriptors to come back.
          ++counters.rejected_no_descriptors;
          log_.Warn("http: cannot accept ({}): shedding a connection and backing off",
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
      const ConnectionLimits::Verdict verdict = admission_.TryAdmit(client);
      if (verdict == ConnectionLimits::Verdict::kAdmitted) {
        counters.open_connections = admission_.open();
        auto executor = socket.get_executor();
        asio::co_spawn(executor, Session(std::move(socket), std::move(client), remote.port()),
                       asio::detached);
        continue;
      }
      const bool server_full = verdict == ConnectionLimits::Verdict::kServerFull;
      ++(server_full ? counters.rejected_server_full : counters.rejected_client_full);
      const std::string detail =
          server_full ? common::StrCat("the server holds its limit of ", limits_.max_connections,
                                       " connections")
                      : common::StrCat("this client holds its limit of ",
                                       limits_.max_connections_per_client, " connections");
      log_.Warn("http: refused a connection from {}: {}", client, detail);
      if (refusals_in_flight_ < kMaxRefusalsInFlight) {
        ++refusals_in_flight_;
        auto executor = socket.get_executor();
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

  // A refused client gets a 503 it can read (and retry after), not a TCP reset; over TLS too,
  // after a handshake (which has kLingerTime, like the rest of the refusal).
  asio::awaitable<void> Refuse(tcp::socket socket, std::string detail) {
    beast::tcp_stream plain(std::move(socket));
    HttpResponse problem = HttpResponse::Problem(503, "Service Unavailable", detail);
    problem.headers.emplace_back("Retry-After", "1");
    http::response<http::string_body> out = ToMessage(std::move(problem), 11, false);
    plain.expires_after(kLingerTime);
    const std::shared_ptr<asio::ssl::context> tls = CurrentTls();
    if (tls == nullptr) {
      co_await http::async_write(plain, out, asio::as_tuple(asio::use_awaitable));
      co_await CloseGracefully(plain, /*drain=*/true);
    } else {
      TlsStream stream(std::move(plain), *tls);
      auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::server,
                                                  asio::as_tuple(asio::use_awaitable));
      if (!ec) {
        co_await http::async_write(stream, out, asio::as_tuple(asio::use_awaitable));
        co_await CloseGracefully(stream, /*drain=*/true);
      }
    }
    --refusals_in_flight_;
  }

  static HttpRequest ToRequest(const http::request_header<>& header, bool* ok) {
    HttpRequest request;
    request.method = std::string(header.method_string());
    const std::string_view target(header.target().data(), header.target().size());
    const size_t q = target.find('?');
    *ok = PercentDecode(target.substr(0, q), &request.path) &&
          (q == std::string_view::npos || ParseQuery(target.substr(q + 1), &request.query));
    for (const auto& field : header) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      request.headers[name] = std::string(field.value());
    }
    return request;
  }

  ProgressDeadline NewProgress() const {
    return ProgressDeadline(Clock::now(), std::chrono::seconds(limits_.progress_interval_seconds),
                            limits_.min_progress_bytes);
  }

  // Reads the rest of a request body, which must keep moving (HttpLimits::min_progress_bytes).
  template <class Stream, class Parser>
  asio::awaitable<beast::error_code> ReadBody(Stream& stream, beast::flat_buffer& buffer,
                                              Parser& parser) {
    ProgressDeadline progress = NewProgress();
    while (!parser.is_done()) {
      beast::get_lowest_layer(stream).expires_at(progress.deadline());
      auto [ec, n] = co_await http::async_read_some(stream, buffer, parser,
                                                    asio::as_tuple(asio::use_awaitable));
      if (TimedOut(ec, progress.deadline())) co_return beast::error::timeout;
      if (ec) co_return ec;
      progress.Add(n, Clock::now());
    }
    co_return beast::error_code{};
  }

  // Writes a response, which the client must keep reading: one that stops reading loses the
  // connection within an interval instead of pinning the response's memory.
  template <class Stream>
  asio::awaitable<beast::error_code> WriteMessage(Stream& stream,
                                                  http::response<http::string_body>& message) {
    http::response_serializer<http::string_body> serializer(message);
    ProgressDeadline progress = NewProgress();
    while (!serializer.is_done()) {
      beast::get_lowest_layer(stream).expires_at(progress.deadline());
      auto [ec, n] =
          co_await http::async_write_some(stream, serializer, asio::as_tuple(asio::use_awaitable));
      if (TimedOut(ec, progress.deadline())) co_return beast::error::timeout;
      if (ec) co_return ec;
      progress.Add(n, Clock::now());
    }
    co_return beast::error_code{};
  }

  // Sends a streamed body: the header, then each piece the producer makes as one chunk, each
  // chunk under the progress rule. The producer runs on the stream pool and blocks while
  // kStreamPiecesQueued pieces wait; once the client is gone the channel closes and its next
  // write fails. Returns false when the connection cannot be reused.
  template <class Stream>
  asio::awaitable<bool> WriteStreamed(Stream& stream, HttpResponse& response, unsigned version,
                                      bool keep_alive, const std::string& peer) {
    http::response<http::empty_body> head{static_cast<http::status>(response.status), version};
    head.set(http::field::server, "podscope");
    SetSafetyHeaders(head, response);
    head.set(http::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) head.set(name, value);
    head.keep_alive(keep_alive);
    head.chunked(true);
    http::response_serializer<http::empty_body> header(head);
    beast::get_lowest_layer(stream).expires_after(
        std::chrono::seconds(limits_.progress_interval_seconds));
    auto [head_ec, head_n] =
        co_await http::async_write_header(stream, header, asio::as_tuple(asio::use_awaitable));
    if (head_ec) co_return false;

    auto channel = std::make_shared<PieceChannel>(io_, kStreamPiecesQueued);
    {
      absl::MutexLock lock(&streams_mu_);
      open_streams_.insert(channel);
    }
    asio::post(streams_, [this, channel, produce = std::move(response.stream)] {
      const BodyWriter write = [&channel](std::string_view piece) -> absl::Status {
        for (size_t at = 0; at < piece.size(); at += kStreamPieceBytes) {
          try {
            channel
                ->async_send(boost::system::error_code{},
                             std::string(piece.substr(at, kStreamPieceBytes)), asio::use_future)
                .get();
          } catch (const std::exception&) {
            return absl::CancelledError("the client is gone");
          }
        }
        return absl::OkStatus();
      };
      absl::Status status;
      try {
        status = produce(write);
      } catch (const std::exception& e) {
        status = absl::InternalError(e.what());
      }
      const boost::system::error_code end =
          status.ok() ? boost::system::error_code{} : asio::error::operation_aborted;
      try {
        channel->async_send(end, std::string(), asio::use_future)
            .get();  // fails at once once closed
      } catch (const std::exception&) {
      }
      absl::MutexLock lock(&streams_mu_);
      open_streams_.erase(channel);
    });

    bool whole = false;
    ProgressDeadline progress = NewProgress();
    while (true) {
      auto [ec, piece] = co_await channel->async_receive(asio::as_tuple(asio::use_awaitable));
      if (ec) break;  // the producer failed (or closed): the body ends short
      if (piece.empty()) {
        whole = true;
        break;
      }
      beast::get_lowest_layer(stream).expires_at(progress.deadline());
      auto [write_ec, n] = co_await asio::async_write(stream, http::make_chunk(asio::buffer(piece)),
                                                      asio::as_tuple(asio::use_awaitable));
      if (TimedOut(write_ec, progress.deadline())) {
        ++counters.timeouts_response;
        log_.Warn("http: {} did not read its streamed response (dropped)", peer);
      }
      if (write_ec) break;
      progress.Add(n, Clock::now());
    }
    channel->close();  // a producer still writing fails at once and stops
    if (!whole) co_return false;
    beast::get_lowest_layer(stream).expires_after(
        std::chrono::seconds(limits_.progress_interval_seconds));
    auto [last_ec, last_n] = co_await asio::async_write(stream, http::make_chunk_last(),
                                                        asio::as_tuple(asio::use_awaitable));
    co_return !last_ec && keep_alive;
  }

  // Half-closes, then (when the client may still be sending) reads and drops what it sends for
  // a little while, so that our response is not lost to a reset; then closes.
  static asio::awaitable<void> CloseGracefully(beast::tcp_stream& stream, bool drain) {
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    if (drain) {
      stream.expires_after(kLingerTime);
      std::array<char, 16 << 10> scratch;
      size_t total = 0;
      while (total < kLingerBytes) {
        auto [ec, n] = co_await stream.async_read_some(asio::buffer(scratch),
                                                       asio::as_tuple(asio::use_awaitable));
        if (ec) break;
        total += n;
      }
    }
    stream.socket().close(ignored);
  }

  // TLS: sends close_notify and waits (a little) for the client's, reading and dropping what it
  // still sends meanwhile; a client that says nothing is cut off after kLingerTime.
  static asio::awaitable<void> CloseGracefully(TlsStream& stream, bool drain) {
    stream.next_layer().expires_after(kLingerTime);
    co_await stream.async_shutdown(asio::as_tuple(asio::use_awaitable));
    beast::error_code ignored;
    stream.next_layer().socket().close(ignored);
  }

  // The TLS context new connections use (replaced whole by ReloadTls); null: plain HTTP.
  std::shared_ptr<asio::ssl::context> CurrentTls() {
    absl::MutexLock lock(&tls_mu_);
    return tls_;
  }

 public:
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
          common::StrCat("--tls-cert ", files.cert_file, ": ", TlsError(ec)));
    context->use_private_key_file(files.key_file, asio::ssl::context::pem, ec);
    if (ec)
      return absl::InvalidArgumentError(
          common::StrCat("--tls-key ", files.key_file, ": ", TlsError(ec)));
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

 private:
  static std::string TlsError(const boost::system::error_code& ec) {
    std::string text = ec.message();
    if (ec.category() == asio::error::get_ssl_category()) {
      char buffer[256];
      ERR_error_string_n(static_cast<unsigned long>(ec.value()), buffer, sizeof(buffer));
      text = buffer;
    }
    return text;
  }

  asio::awaitable<void> Session(tcp::socket socket, std::string client, uint16_t client_port) {
    const std::string peer = common::StrCat(client, ":", client_port);
    beast::tcp_stream plain(std::move(socket));
    // Held for the connection's life: a reload replaces the context for new connections only.
    const std::shared_ptr<asio::ssl::context> tls = CurrentTls();
    if (tls == nullptr) {
      co_await Serve(plain, peer);
    } else {
      TlsStream stream(std::move(plain), *tls);
      // The handshake has the header's time: a client that connects and stays silent, or speaks
      // plain HTTP to the TLS port, holds a slot no longer than one that sends half a header.
      stream.next_layer().expires_after(std::chrono::seconds(limits_.header_timeout_seconds));
      auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::server,
                                                  asio::as_tuple(asio::use_awaitable));
      if (ec) {
        ++counters.tls_handshake_failures;
        log_.Warn("http: TLS handshake with {} failed: {}", peer, TlsError(ec));
        beast::error_code ignored;
        stream.next_layer().socket().close(ignored);
      } else {
        co_await Serve(stream, peer);
      }
    }
    admission_.Release(client);
    counters.open_connections = admission_.open();
  }

  // Serves requests on one connection until it closes or fails, then closes it.
  template <class Stream>
  asio::awaitable<void> Serve(Stream& stream, const std::string& peer) {
    beast::flat_buffer buffer;
    bool drain = false;  // request bytes may still be coming that were never read
    bool served = false;
    while (true) {
      // A new connection has header_timeout_seconds to start its request (one that sends
      // nothing holds a slot no longer than a slow one); between requests a kept-alive
      // connection may idle for idle_timeout_seconds. Once a request starts, its header has
      // header_timeout_seconds to arrive in full.
      if (buffer.size() == 0) {
        beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(
            served ? limits_.idle_timeout_seconds : limits_.header_timeout_seconds));
        auto [ec, n] = co_await stream.async_read_some(buffer.prepare(4096),
                                                       asio::as_tuple(asio::use_awaitable));
        if (ec) break;
        buffer.commit(n);
      }
      const Clock::time_point header_deadline =
          Clock::now() + std::chrono::seconds(limits_.header_timeout_seconds);
      beast::get_lowest_layer(stream).expires_at(header_deadline);
      http::request_parser<http::empty_body> header_parser;
      header_parser.header_limit(limits_.max_header_bytes);
      header_parser.body_limit(boost::none);
      auto [ec, n] = co_await http::async_read_header(stream, buffer, header_parser,
                                                      asio::as_tuple(asio::use_awaitable));
      if (TimedOut(ec, header_deadline)) {
        ++counters.timeouts_header;
        log_.Warn("http: {} did not send a whole header within {} s", peer,
                  limits_.header_timeout_seconds);
        break;
      }
      if (ec && IsMalformedRequest(ec)) {
        // Over-long header, bad version, Content-Length with Transfer-Encoding...: say so.
        ++counters.malformed_requests;
        log_.Warn("http: malformed request from {}: {}", peer, ec.message());
        const bool too_long = ec == http::error::header_limit;
        HttpResponse problem =
            too_long ? HttpResponse::Problem(431, "Request Header Fields Too Large",
                                             common::StrCat("request headers are limited to ",
                                                            limits_.max_header_bytes, " bytes"))
                     : HttpResponse::Problem(400, "Bad Request",
                                             common::StrCat("malformed request: ", ec.message()));
        Count(problem.status, Clock::now());
        http::response<http::string_body> out = ToMessage(std::move(problem), 11, false);
        co_await WriteMessage(stream, out);
        drain = true;
        break;
      }
      if (ec) break;
      const auto start = Clock::now();
      served = true;
      ++in_flight_;
      ++counters.requests;
      bool ok = true;
      HttpRequest request = ToRequest(header_parser.get(), &ok);
      request.peer = peer;
      const unsigned version = header_parser.get().version();
      const bool keep_alive = header_parser.get().keep_alive();
      HttpResponse response;
      bool path_known = false;
      const Route* route =
          ok ? router_.Match(request.method, request.path, &request.params, &path_known) : nullptr;
      bool read_body_ok = true;
      std::string upload_path;
      if (!ok) {
        response = HttpResponse::Problem(400, "Bad Request",
                                         "malformed percent-encoding in the request target");
      } else if (route == nullptr) {
        response = path_known
                       ? HttpResponse::Problem(
                             405, "Method Not Allowed",
                             common::StrCat(request.method, " is not allowed on ", request.path))
                       : HttpResponse::Problem(404, "Not Found",
                                               common::StrCat("no route for ", request.path));
      } else if (std::optional<HttpResponse> refusal =
                     authorizer_ != nullptr ? authorizer_->Check(request, route->access)
                                            : std::nullopt) {
        response = std::move(*refusal);
        route = nullptr;
      } else if (request.method == "POST" && !route->streamed_upload &&
                 !IsJsonMediaType(request.Header("content-type"))) {
        // A cross-site form can POST only form or text types: asking for JSON keeps a web page
        // a user visits from starting or cancelling captures.
        response = HttpResponse::Problem(
            415, "Unsupported Media Type",
            common::StrCat("POST ", request.path, " takes Content-Type: application/json"));
        route = nullptr;
      }
      // Read the body, within its bound. A declared length over the bound is refused before
      // reading anything (the limits set on the header parser are checked at header time).
      const uint64_t limit = route != nullptr && route->streamed_upload ? limits_.max_upload_bytes
                                                                        : limits_.max_body_bytes;
      const auto declared = header_parser.content_length();
      if (route != nullptr && declared && *declared > limit) {
        response = HttpResponse::Problem(
            413, "Payload Too Large",
            common::StrCat(route->streamed_upload ? "uploads" : "request bodies",
                           " are limited to ", limit, " bytes"));
        read_body_ok = false;
        route = nullptr;
      }
      if (!read_body_ok) {
        // Nothing more is read from this connection: it is closed after the response.
      } else if (route != nullptr && route->streamed_upload) {
        upload_path = common::StrCat(limits_.upload_dir, "/podscope-upload-", getpid(), "-",
                                     next_upload_++, ".part");
        http::request_parser<http::file_body> parser(std::move(header_parser));
        parser.body_limit(limits_.max_upload_bytes);
        beast::error_code file_ec;
        parser.get().body().open(upload_path.c_str(), beast::file_mode::write, file_ec);
        if (file_ec) {
          response =
              HttpResponse::Problem(500, "Internal Server Error",
                                    common::StrCat("cannot stage the upload: ", file_ec.message()));
          read_body_ok = false;
        } else {
          const beast::error_code read_ec = co_await ReadBody(stream, buffer, parser);
          parser.get().body().close();
          read_body_ok = !read_ec;
          if (read_ec)
            response = BodyError(read_ec, "upload", limits_.max_upload_bytes, peer);
          else
            request.body_file = upload_path;
        }
      } else if (route == nullptr) {
        read_body_ok = false;  // an unrouted request's body is not read: close after answering
      } else if (header_parser.get().has_content_length() || header_parser.get().chunked()) {
        http::request_parser<http::string_body> parser(std::move(header_parser));
        parser.body_limit(limits_.max_body_bytes);
        const beast::error_code read_ec = co_await ReadBody(stream, buffer, parser);
        read_body_ok = !read_ec;
        if (read_ec)
          response = BodyError(read_ec, "request body", limits_.max_body_bytes, peer);
        else
          request.body = std::move(parser.get().body());
      }
      if (route != nullptr && read_body_ok) {
        if (route->heavy || route->forwarded) {
          // The handler runs as its own coroutine on the heavy (or forwarding) pool; this one
          // resumes on the I/O threads when it is done. (Posting to the pool and awaiting the
          // post would resume here, on an I/O thread, and run the handler there.)
          response = co_await asio::co_spawn(
              route->heavy ? heavy_ : forwards_,
              [this, route, &request]() -> asio::awaitable<HttpResponse> {
                co_return Invoke(*route, request);
              },
              asio::use_awaitable);
        } else {
          response = Invoke(*route, request);
        }
      }
      if (!upload_path.empty()) {
        std::error_code ignored;
        std::filesystem::remove(upload_path, ignored);
      }
      const int status = response.status;
      if (response.stream) {
        const bool reusable =
            co_await WriteStreamed(stream, response, version, keep_alive && read_body_ok, peer);
        Count(status, start);
        --in_flight_;
        if (!reusable) break;
        continue;
      }
      http::response<http::string_body> out =
          ToMessage(std::move(response), version, keep_alive && read_body_ok);
      const beast::error_code write_ec = co_await WriteMessage(stream, out);
      if (write_ec == beast::error::timeout) {
        ++counters.timeouts_response;
        log_.Warn("http: {} did not read its {} response (dropped)", peer, status);
      }
      Count(status, start);
      --in_flight_;
      if (!read_body_ok) drain = true;
      if (write_ec || !out.keep_alive()) break;
    }
    co_await CloseGracefully(stream, drain);
  }

  // The answer to a body that could not be read whole.
  HttpResponse BodyError(const beast::error_code& ec, std::string_view what, uint64_t limit,
                         const std::string& peer) {
    if (ec == http::error::body_limit) {
      return HttpResponse::Problem(413, "Payload Too Large",
                                   common::StrCat(what, "s are limited to ", limit, " bytes"));
    }
    if (ec == beast::error::timeout) {
      ++counters.timeouts_body;
      log_.Warn("http: {}'s {} moved slower than {} bytes per {} s (dropped)", peer, what,
                limits_.min_progress_bytes, limits_.progress_interval_seconds);
    } else if (IsMalformedRequest(ec)) {
      ++counters.malformed_requests;
      log_.Warn("http: malformed {} from {}: {}", what, peer, ec.message());
    }
    return HttpResponse::Problem(400, "Bad Request",
                                 common::StrCat(what, " interrupted: ", ec.message()));
  }

  HttpResponse Invoke(const Route& route, HttpRequest& request) {
    try {
      return route.handler(request);
    } catch (const std::exception& e) {
      return HttpResponse::Problem(500, "Internal Server Error", e.what());
    }
  }

  void Count(int status, Clock::time_point start) {
    (status < 300   ? counters.responses_2xx
     : status < 500 ? counters.responses_4xx
                    : counters.responses_5xx)++;
    counters.latency_ns_total += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
  }

  const Router& router_;
  HttpLimits limits_;
  ConnectionLimits admission_;
  RateLimitedLog log_{"http"};
  asio::io_context io_;
  tcp::acceptor acceptor_{io_};
  // Heavy handlers (imports, exports, analyses) run here, never on the I/O threads.
  asio::io_context heavy_;
  asio::executor_work_guard<asio::io_context::executor_type> heavy_work_ =
      asio::make_work_guard(heavy_);
  // Streamed bodies are produced here (blocking on their client's pace), apart from the heavy
  // pool, so slow readers can hold up other streams but never an analysis or an import.
  asio::io_context streams_;
  asio::executor_work_guard<asio::io_context::executor_type> stream_work_ =
      asio::make_work_guard(streams_);
  // Calls that wait on other shards (Route::forwarded).
  asio::io_context forwards_;
  asio::executor_work_guard<asio::io_context::executor_type> forward_work_ =
      asio::make_work_guard(forwards_);
  absl::Mutex streams_mu_;
  absl::flat_hash_set<std::shared_ptr<PieceChannel>> open_streams_ ABSL_GUARDED_BY(streams_mu_);
  std::vector<std::thread> threads_;
  std::vector<std::thread> heavy_threads_;
  std::atomic<bool> stopped_{false};
  std::atomic<int> in_flight_{0};
  std::atomic<int> refusals_in_flight_{0};
  std::atomic<uint64_t> next_upload_{0};
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
void HttpServer::set_authorizer(Authorizer* authorizer) { impl_->authorizer_ = authorizer; }
void HttpServer::Stop(int grace_seconds) { impl_->Stop(grace_seconds); }
const HttpCounters& HttpServer::counters() const { return impl_->counters; }

}  // namespace podscope::coordinator
