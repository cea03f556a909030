// Inside the HTTP server (http_server.cc): what a connection's session shares with the accept
// loop, and the sessions themselves. A session is a coroutine template over its stream
// (http_session_impl.h); the plain one is compiled in http_session_plain.cc, the TLS one in
// http_session_tls*.cc (the request loop, the answer to a request, streamed responses), so that
// no file instantiates Beast's HTTP machinery for both streams, or all of it over TLS: one file
// doing both was the slowest file of the build by far.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "http/connection_limits.h"
#include "http/http_server.h"
#include "http/http_types.h"
#include "http/rate_limited_log.h"

namespace podscope::http::sessions {

// Pieces of a streamed body, from the producer's thread to the session's coroutine. An empty
// piece with no error ends the body; an error ends it short.
using PieceChannel =
    boost::asio::experimental::concurrent_channel<void(boost::system::error_code, std::string)>;

// Ends a stream from the session's side: later sends fail, and so does a send already waiting
// for room (close alone completes only waiting receives: a producer blocked on a full channel
// would hold its stream thread for good, and every later export would wait behind it).
inline void EndStream(PieceChannel& channel) {
  channel.close();
  channel.cancel();
}

// Owned by the server; sessions hold a reference for their lives. Stop waits for requests in
// flight and streamed bodies; sessions still suspended then are destroyed with `io`.
struct ServerState {
  ServerState(const Router& router_in, HttpLimits limits_in)
      : router(router_in), limits(std::move(limits_in)) {}

  const Router& router;
  const HttpLimits limits;
  Authorizer* authorizer = nullptr;  // set before Start; not owned
  HttpCounters counters;
  RateLimitedLog log{"http"};
  // Sockets and the sessions' coroutines.
  boost::asio::io_context io;
  // Heavy handlers (imports, exports, analyses) run here, never on the I/O threads.
  boost::asio::io_context heavy;
  // Streamed bodies are produced here (blocking on their client's pace), apart from the heavy
  // pool, so slow readers can hold up other streams but never an analysis or an import.
  boost::asio::io_context streams;
  // Calls that wait on other shards (Route::forwarded).
  boost::asio::io_context forwards;
  // Streamed bodies being produced: Stop ends them while the I/O loop still runs.
  absl::Mutex streams_mu;
  absl::flat_hash_set<std::shared_ptr<PieceChannel>> open_streams ABSL_GUARDED_BY(streams_mu);
  std::atomic<int> in_flight{0};  // requests between their header and their response
  std::atomic<uint64_t> next_upload{0};
};

// One admitted connection, as its session and the accept loop share it. While its stream
// lives, the session attaches a way to close it; the session says when a request was
// authenticated, and when an authenticated connection waits for its next request. The accept
// loop may evict the connection, from any thread, to make room for a newer one while it is
// unauthenticated or waiting (connection_limits.h).
class ConnectionHandle : public std::enable_shared_from_this<ConnectionHandle> {
 public:
  // `strand`: the connection's; `limits`: the server's, which admitted it; `on_authenticated`
  // runs once, after the first authenticated request is counted, saying whether another
  // connection of the same principal was dropped to make room for this one.
  ConnectionHandle(boost::asio::any_io_executor strand, ConnectionLimits& limits,
                   std::function<void(bool dropped_one)> on_authenticated)
      : strand_(std::move(strand)),
        limits_(limits),
        on_authenticated_(std::move(on_authenticated)) {}
  // The connection's id in the server's ConnectionLimits; before its session starts.
  void set_id(uint64_t id) { id_ = id; }

  // Detaches when it goes (the session's coroutine frame holds it, so a frame destroyed unfinished
  // detaches too).
  class Attachment {
   public:
    explicit Attachment(ConnectionHandle& handle) : handle_(handle) {}
    ~Attachment() { handle_.Detach(); }
    Attachment(const Attachment&) = delete;
    Attachment& operator=(const Attachment&) = delete;

   private:
    ConnectionHandle& handle_;
  };

  // On the connection's strand: `close` closes the stream until the Attachment goes. Evicted
  // already: closes at once.
  [[nodiscard]] std::unique_ptr<Attachment> Attach(std::function<void()> close);
  // False when the principal (a token's name, or empty) holds its share of connections
  // already, none of them waiting long enough to give way: the session answers 503 and closes
  // the connection.
  [[nodiscard]] bool Authenticated(const std::string& principal);
  // Between requests (after the first): the connection may be dropped while idle.
  void Idle() { limits_.Idle(id_); }
  void Busy() { limits_.Busy(id_); }
  // Any thread: the close runs on the connection's strand, if the stream still lives.
  void Evict();

 private:
  void Detach();

  const boost::asio::any_io_executor strand_;
  ConnectionLimits& limits_;
  const std::function<void(bool)> on_authenticated_;
  uint64_t id_ = 0;
  std::atomic<bool> authenticated_{false};
  absl::Mutex mu_;
  std::function<void()> close_ ABSL_GUARDED_BY(mu_);
  bool evicted_ ABSL_GUARDED_BY(mu_) = false;
};

// Serves requests on one accepted connection until it closes or fails, then closes it. With a
// TLS context, the handshake comes first (within tls_handshake_timeout_seconds).
boost::asio::awaitable<void> ServePlain(ServerState& state, boost::asio::ip::tcp::socket socket,
                                        std::string peer, std::shared_ptr<ConnectionHandle> handle);
boost::asio::awaitable<void> ServeTls(ServerState& state, boost::asio::ip::tcp::socket socket,
                                      std::shared_ptr<boost::asio::ssl::context> tls,
                                      std::string peer, std::shared_ptr<ConnectionHandle> handle);

// A refused connection gets a 503 it can read (and retry after), not a TCP reset; over TLS
// too, after a handshake. All of it within kLingerTime.
boost::asio::awaitable<void> RefusePlain(boost::asio::ip::tcp::socket socket, std::string detail);
boost::asio::awaitable<void> RefuseTls(boost::asio::ip::tcp::socket socket,
                                       std::shared_ptr<boost::asio::ssl::context> tls,
                                       std::string detail);

// OpenSSL's reason for a TLS error, else the error's message.
std::string TlsErrorText(const boost::system::error_code& ec);

}  // namespace podscope::http::sessions
