// The session coroutine of http_session.h as a template over the stream (plain or TLS);
// included by http_session_plain.cc and http_session_tls.cc only, each instantiating it for its
// own stream type.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <type_traits>

#include "common/str_util.h"
#include "http/http_session.h"
#include "http/progress_deadline.h"
#include "http/request_admission.h"

namespace podscope::http::sessions {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace beast_http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// After an error response the client may still be sending its request: read and drop up to
// this much, for up to this long, before closing, so that the close does not reset the
// connection under the response the client has yet to read (a client sending a large upload
// after its 413 still gets a reset, but only past this much).
inline constexpr size_t kLingerBytes = 16 << 20;
inline constexpr auto kLingerTime = std::chrono::seconds(2);
// A streamed body travels in pieces of at most this size, and at most kStreamPiecesQueued wait
// per connection: what a slow reader pins is about a megabyte, whatever the body's size.
inline constexpr size_t kStreamPieceBytes = 256 << 10;
inline constexpr size_t kStreamPiecesQueued = 4;

// Whether the peer has closed its side of `fd` (or the connection broke): asked without reading,
// so the next request's bytes, if any, stay where they are.
inline bool PeerClosed(int fd) {
  pollfd p{.fd = fd, .events = POLLRDHUP, .revents = 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

// An error of the request's syntax (as opposed to the peer going away mid-header).
inline bool IsMalformedRequest(const beast::error_code& ec) {
  return ec.category() == beast_http::make_error_code(beast_http::error::bad_version).category() &&
         ec != beast_http::error::end_of_stream && ec != beast_http::error::partial_message;
}

// Whether an operation failed because its deadline passed. beast::tcp_stream reports its own
// timeout as error::timeout, but composed HTTP operations can see the cancellation it causes
// as operation_aborted instead; the clock settles it.
inline bool TimedOut(const beast::error_code& ec, Clock::time_point deadline) {
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

inline beast_http::response<beast_http::string_body> ToMessage(HttpResponse response,
                                                               unsigned version, bool keep_alive) {
  beast_http::response<beast_http::string_body> out{
      static_cast<beast_http::status>(response.status), version};
  out.set(beast_http::field::server, "podscope");
  SetSafetyHeaders(out, response);
  if (!response.content_type.empty())
    out.set(beast_http::field::content_type, response.content_type);  // not on a 304
  for (const auto& [name, value] : response.headers) out.set(name, value);
  out.body() = std::move(response.body);
  out.keep_alive(keep_alive);
  out.prepare_payload();
  return out;
}

// The 503 of a refused connection.
inline beast_http::response<beast_http::string_body> RefusalMessage(const std::string& detail) {
  HttpResponse problem = HttpResponse::Problem(503, "Service Unavailable", detail);
  problem.headers.emplace_back("Retry-After", "1");
  return ToMessage(std::move(problem), 11, false);
}

// Half-closes, then (when the client may still be sending) reads and drops what it sends for
// a little while, so that our response is not lost to a reset; then closes.
inline asio::awaitable<void> CloseGracefully(beast::tcp_stream& stream, bool drain) {
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
inline asio::awaitable<void> CloseGracefully(TlsStream& stream, bool /*drain*/) {
  stream.next_layer().expires_after(kLingerTime);
  co_await stream.async_shutdown(asio::as_tuple(asio::use_awaitable));
  beast::error_code ignored;
  stream.next_layer().socket().close(ignored);
}

// One connection's requests, one after another, over Stream (beast::tcp_stream or TlsStream).
template <class Stream>
class Session {
 public:
  Session(ServerState& state, Stream& stream, std::string peer, ConnectionHandle& handle)
      : state_(state),
        limits_(state.limits),
        stream_(stream),
        peer_(std::move(peer)),
        handle_(handle) {}

  // Serves requests until the connection closes or fails, then closes it.
  asio::awaitable<void> Serve() {
    beast::flat_buffer buffer;
    bool drain = false;  // request bytes may still be coming that were never read
    bool served = false;
    while (true) {
      // A new connection has header_timeout_seconds to start its request (one that sends
      // nothing holds a slot no longer than a slow one); between requests a kept-alive
      // connection may idle for idle_timeout_seconds. Once a request starts, its header has
      // header_timeout_seconds to arrive in full.
      // Between requests, until the next one's header is whole, an authenticated connection
      // may be dropped to make room for a new one when every slot is taken
      // (connection_limits.h): a byte of a header does not make a connection busy.
      if (served) handle_.Idle();
      if (buffer.size() == 0) {
        Lowest().expires_after(std::chrono::seconds(served ? limits_.idle_timeout_seconds
                                                           : limits_.header_timeout_seconds));
        auto [ec, n] = co_await stream_.async_read_some(buffer.prepare(4096),
                                                        asio::as_tuple(asio::use_awaitable));
        if (ec) break;
        buffer.commit(n);
      }
      const Clock::time_point header_deadline =
          Clock::now() + std::chrono::seconds(limits_.header_timeout_seconds);
      Lowest().expires_at(header_deadline);
      beast_http::request_parser<beast_http::empty_body> header_parser;
      header_parser.header_limit(limits_.max_header_bytes);
      header_parser.body_limit(boost::none);
      auto [ec, n] = co_await beast_http::async_read_header(stream_, buffer, header_parser,
                                                            asio::as_tuple(asio::use_awaitable));
      if (TimedOut(ec, header_deadline)) {
        ++state_.counters.timeouts_header;
        state_.log.Warn("http: {} did not send a whole header within {} s", peer_,
                        limits_.header_timeout_seconds);
        break;
      }
      if (ec && IsMalformedRequest(ec)) {
        co_await AnswerMalformed(ec);
        drain = true;
        break;
      }
      if (ec) break;
      if (served) handle_.Busy();
      served = true;
      const Outcome outcome = co_await Answer(header_parser, buffer);
      if (outcome.drain) drain = true;
      if (!outcome.reusable) break;
    }
    co_await CloseGracefully(stream_, drain);
  }

 private:
  struct Outcome {
    bool reusable = false;  // the connection may carry another request
    bool drain = false;     // the request's body was not read whole
  };

  auto& Lowest() { return beast::get_lowest_layer(stream_); }

  // Over-long header, bad version, Content-Length with Transfer-Encoding...: say so.
  asio::awaitable<void> AnswerMalformed(const beast::error_code& ec) {
    ++state_.counters.malformed_requests;
    state_.log.Warn("http: malformed request from {}: {}", peer_, ec.message());
    const bool too_long = ec == beast_http::error::header_limit;
    HttpResponse problem =
        too_long ? HttpResponse::Problem(431, "Request Header Fields Too Large",
                                         common::StrCat("request headers are limited to ",
                                                        limits_.max_header_bytes, " bytes"))
                 : HttpResponse::Problem(400, "Bad Request",
                                         common::StrCat("malformed request: ", ec.message()));
    Count(problem.status, Clock::now());
    beast_http::response<beast_http::string_body> out = ToMessage(std::move(problem), 11, false);
    co_await WriteMessage(out);
  }

  // One request whose header has arrived: admitted (request_admission.h), its body read, its
  // handler run, its response written.
  asio::awaitable<Outcome> Answer(beast_http::request_parser<beast_http::empty_body>& header_parser,
                                  beast::flat_buffer& buffer);

  static HttpRequest ToRequest(const beast_http::request_header<>& header, bool* ok) {
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
  template <class Parser>
  asio::awaitable<beast::error_code> ReadBody(beast::flat_buffer& buffer, Parser& parser) {
    ProgressDeadline progress = NewProgress();
    while (!parser.is_done()) {
      Lowest().expires_at(progress.deadline());
      auto [ec, n] = co_await beast_http::async_read_some(stream_, buffer, parser,
                                                          asio::as_tuple(asio::use_awaitable));
      if (TimedOut(ec, progress.deadline())) co_return beast::error::timeout;
      if (ec) co_return ec;
      progress.Add(n, Clock::now());
    }
    co_return beast::error_code{};
  }

  // Writes a response, which the client must keep reading: one that stops reading loses the
  // connection within an interval instead of pinning the response's memory.
  asio::awaitable<beast::error_code> WriteMessage(
      beast_http::response<beast_http::string_body>& message);
  // Over TLS, every answer tells browsers to come back over HTTPS only (HSTS, a year): a port
  // that serves HTTPS alone has nothing to offer over plain HTTP.
  template <class Message>
  static void SetTransportSecurity(Message& out) {
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      out.set(beast_http::field::strict_transport_security, "max-age=31536000");
    }
  }

  // Sends a streamed body: the header, then each piece the producer makes as one chunk, each
  // chunk under the progress rule. The producer runs on the stream pool and blocks while
  // kStreamPiecesQueued pieces wait; once the client is gone the channel closes and its next
  // write fails. Returns false when the connection cannot be reused.
  asio::awaitable<bool> WriteStreamed(HttpResponse& response, unsigned version, bool keep_alive);

  // On the stream pool: runs the body's producer, handing its pieces to the session through
  // the channel, then an empty piece (or an error) to end the body.
  static void Produce(ServerState& state, const std::shared_ptr<PieceChannel>& channel,
                      const std::function<absl::Status(const BodyWriter&)>& produce) {
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
      channel->async_send(end, std::string(), asio::use_future).get();  // fails at once once closed
    } catch (const std::exception&) {
    }
    absl::MutexLock lock(&state.streams_mu);
    state.open_streams.erase(channel);
  }

  // The answer to a body that could not be read whole.
  // `what` names one ("upload"), `what_plural` several ("uploads"), as request_admission.cc does.
  HttpResponse BodyError(const beast::error_code& ec, std::string_view what,
                         std::string_view what_plural, uint64_t limit) {
    if (ec == beast_http::error::body_limit) {
      return HttpResponse::Problem(
          413, "Payload Too Large",
          common::StrCat(what_plural, " are limited to ", limit, " bytes"));
    }
    if (ec == beast::error::timeout) {
      ++state_.counters.timeouts_body;
      state_.log.Warn("http: {}'s {} moved slower than {} bytes per {} s (dropped)", peer_, what,
                      limits_.min_progress_bytes, limits_.progress_interval_seconds);
    } else if (IsMalformedRequest(ec)) {
      ++state_.counters.malformed_requests;
      state_.log.Warn("http: malformed {} from {}: {}", what, peer_, ec.message());
    }
    return HttpResponse::Problem(400, "Bad Request",
                                 common::StrCat(what, " interrupted: ", ec.message()));
  }

  static HttpResponse Invoke(const Route& route, HttpRequest& request) {
    try {
      return route.handler(request);
    } catch (const std::exception& e) {
      return HttpResponse::Problem(500, "Internal Server Error", e.what());
    }
  }

  void Count(int status, Clock::time_point start) {
    HttpCounters& counters = state_.counters;
    (status < 300   ? counters.responses_2xx
     : status < 500 ? counters.responses_4xx
                    : counters.responses_5xx)++;
    counters.latency_ns_total += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
  }

  ServerState& state_;
  const HttpLimits& limits_;
  Stream& stream_;
  const std::string peer_;
  ConnectionHandle& handle_;
};

// The largest parts of a session, defined apart so that each can be compiled in a file of its own
// (explicit instantiation; the other files declare it extern): a TLS session is too large a file
// otherwise.
//
// gcc 12 takes the coroutine frame's release here for a mismatched new/delete: Asio allocates
// an awaitable's frame with its own operator new and frees it with the matching operator delete
// of the same class, which gcc's check does not pair up once the frame's destroy path is
// compiled apart from its caller.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
template <class Stream>
asio::awaitable<typename Session<Stream>::Outcome> Session<Stream>::Answer(
    beast_http::request_parser<beast_http::empty_body>& header_parser, beast::flat_buffer& buffer) {
  const auto start = Clock::now();
  ++state_.in_flight;
  ++state_.counters.requests;
  bool target_ok = true;
  HttpRequest request = ToRequest(header_parser.get(), &target_ok);
  request.peer = peer_;
  const unsigned version = header_parser.get().version();
  const bool keep_alive = limits_.keep_alive && header_parser.get().keep_alive();
  DeclaredBody declared{.chunked = header_parser.get().chunked()};
  if (const auto length = header_parser.content_length()) declared.content_length = *length;
  const Admission admission =
      AdmitRequest(state_.router, state_.authorizer, limits_, target_ok, declared, &request);
  const Route* route = admission.route;
  HttpResponse response = admission.refusal;
  if (admission.authenticated && !handle_.Authenticated(request.principal)) {
    ++state_.counters.rejected_token_full;
    state_.log.Warn("http: refused a request from {}: token \"{}\" holds its {} connections", peer_,
                    request.principal, limits_.max_connections_per_token);
    route = nullptr;
    response = HttpResponse::Problem(
        503, "Service Unavailable",
        common::StrCat("token \"", request.principal, "\" holds its limit of ",
                       limits_.max_connections_per_token,
                       " connections (limits.max_connections_per_token); close one or retry"));
    response.headers.emplace_back("Retry-After", "1");
  }
  // A refused request's body is never read: the connection closes after the answer.
  bool read_body_ok = route != nullptr;
  std::string upload_path;
  if (route != nullptr && admission.body == Admission::Body::kFile) {
    upload_path = common::StrCat(limits_.upload_dir, "/podscope-upload-", getpid(), "-",
                                 state_.next_upload++, ".part");
    beast_http::request_parser<beast_http::file_body> parser(std::move(header_parser));
    parser.body_limit(limits_.max_upload_bytes);
    beast::error_code file_ec;
    parser.get().body().open(upload_path.c_str(), beast::file_mode::write, file_ec);
    if (file_ec) {
      response =
          HttpResponse::Problem(500, "Internal Server Error",
                                common::StrCat("cannot stage the upload: ", file_ec.message()));
      read_body_ok = false;
    } else {
      const beast::error_code read_ec = co_await ReadBody(buffer, parser);
      parser.get().body().close();
      read_body_ok = !read_ec;
      if (read_ec)
        response = BodyError(read_ec, "upload", "uploads", limits_.max_upload_bytes);
      else
        request.body_file = upload_path;
    }
  } else if (route != nullptr && admission.body == Admission::Body::kString) {
    beast_http::request_parser<beast_http::string_body> parser(std::move(header_parser));
    parser.body_limit(limits_.max_body_bytes);
    const beast::error_code read_ec = co_await ReadBody(buffer, parser);
    read_body_ok = !read_ec;
    if (read_ec)
      response = BodyError(read_ec, "request body", "request bodies", limits_.max_body_bytes);
    else
      request.body = std::move(parser.get().body());
  }
  std::optional<HttpResponse> local;
  if (route != nullptr && read_body_ok && !route->heavy && route->local_answer) {
    try {
      local = route->local_answer(request);
    } catch (const std::exception& e) {
      local = HttpResponse::Problem(500, "Internal Server Error", e.what());
    }
  }
  if (local) {
    response = std::move(*local);
  } else if (route != nullptr && read_body_ok) {
    if (route->heavy || route->forwarded) {
      // The socket outlives the handler (this coroutine awaits it), so the handler may ask.
      const int fd = Lowest().socket().native_handle();
      request.client_gone = [fd] { return PeerClosed(fd); };
      // The handler runs as its own coroutine on the heavy (or forwarding) pool; this one
      // resumes on the I/O threads when it is done. (Posting to the pool and awaiting the
      // post would resume here, on an I/O thread, and run the handler there.)
      response = co_await asio::co_spawn(
          route->heavy ? state_.heavy : state_.forwards,
          [route, &request]() -> asio::awaitable<HttpResponse> {
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
    const bool reusable = co_await WriteStreamed(response, version, keep_alive && read_body_ok);
    Count(status, start);
    --state_.in_flight;
    co_return Outcome{.reusable = reusable};
  }
  beast_http::response<beast_http::string_body> out =
      ToMessage(std::move(response), version, keep_alive && read_body_ok);
  const beast::error_code write_ec = co_await WriteMessage(out);
  if (write_ec == beast::error::timeout) {
    ++state_.counters.timeouts_response;
    state_.log.Warn("http: {} did not read its {} response (dropped)", peer_, status);
  }
  Count(status, start);
  --state_.in_flight;
  co_return Outcome{.reusable = !write_ec && out.keep_alive(), .drain = !read_body_ok};
}

template <class Stream>
asio::awaitable<beast::error_code> Session<Stream>::WriteMessage(
    beast_http::response<beast_http::string_body>& message) {
  SetTransportSecurity(message);
  beast_http::response_serializer<beast_http::string_body> serializer(message);
  ProgressDeadline progress = NewProgress();
  while (!serializer.is_done()) {
    Lowest().expires_at(progress.deadline());
    auto [ec, n] = co_await beast_http::async_write_some(stream_, serializer,
                                                         asio::as_tuple(asio::use_awaitable));
    if (TimedOut(ec, progress.deadline())) co_return beast::error::timeout;
    if (ec) co_return ec;
    progress.Add(n, Clock::now());
  }
  co_return beast::error_code{};
}

template <class Stream>
asio::awaitable<bool> Session<Stream>::WriteStreamed(HttpResponse& response, unsigned version,
                                                     bool keep_alive) {
  beast_http::response<beast_http::empty_body> head{
      static_cast<beast_http::status>(response.status), version};
  head.set(beast_http::field::server, "podscope");
  SetSafetyHeaders(head, response);
  head.set(beast_http::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers) head.set(name, value);
  SetTransportSecurity(head);
  head.keep_alive(keep_alive);
  head.chunked(true);
  beast_http::response_serializer<beast_http::empty_body> header(head);
  Lowest().expires_after(std::chrono::seconds(limits_.progress_interval_seconds));
  auto [head_ec, head_n] =
      co_await beast_http::async_write_header(stream_, header, asio::as_tuple(asio::use_awaitable));
  if (head_ec) co_return false;

  auto channel = std::make_shared<PieceChannel>(state_.io, kStreamPiecesQueued);
  {
    absl::MutexLock lock(&state_.streams_mu);
    state_.open_streams.insert(channel);
  }
  asio::post(state_.streams, [&state = state_, channel, produce = std::move(response.stream)] {
    Produce(state, channel, produce);
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
    Lowest().expires_at(progress.deadline());
    auto [write_ec, n] = co_await asio::async_write(
        stream_, beast_http::make_chunk(asio::buffer(piece)), asio::as_tuple(asio::use_awaitable));
    if (TimedOut(write_ec, progress.deadline())) {
      ++state_.counters.timeouts_response;
      state_.log.Warn("http: {} did not read its streamed response (dropped)", peer_);
    }
    if (write_ec) break;
    progress.Add(n, Clock::now());
  }
  EndStream(*channel);  // a producer still writing fails at once and stops
  if (!whole) co_return false;
  Lowest().expires_after(std::chrono::seconds(limits_.progress_interval_seconds));
  auto [last_ec, last_n] = co_await asio::async_write(stream_, beast_http::make_chunk_last(),
                                                      asio::as_tuple(asio::use_awaitable));
  co_return !last_ec && keep_alive;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace podscope::http::sessions
