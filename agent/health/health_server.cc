#include "agent/health/health_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

#include "common/host_port.h"
#include "common/str_util.h"

namespace podscope::agent {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HealthServer::State {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  ReadyCheck ready;
  uint16_t port = 0;
  int sessions = 0;  // only touched on the server's thread
  std::thread thread;
};

namespace {

constexpr int kMaxSessions = 16;

http::response<http::string_body> Answer(const http::request<http::empty_body>& request,
                                         HealthServer::ReadyCheck& ready) {
  http::response<http::string_body> response;
  response.version(11);
  response.set(http::field::content_type, "text/plain");
  response.set(http::field::connection, "close");
  std::string why;
  if (request.method() != http::verb::get && request.method() != http::verb::head) {
    response.result(http::status::method_not_allowed);
    response.body() = "GET only\n";
  } else if (request.target() == "/healthz") {
    response.result(http::status::ok);
    response.body() = "ok\n";
  } else if (request.target() == "/readyz") {
    const bool ok = ready(&why);
    response.result(ok ? http::status::ok : http::status::service_unavailable);
    response.body() = ok ? "ready\n" : why + "\n";
  } else {
    response.result(http::status::not_found);
    response.body() = "/healthz or /readyz\n";
  }
  response.prepare_payload();
  return response;
}

// One connection: a request within 2 s, the answer within 2 s more. Asynchronous, because
// Beast's timers bound only asynchronous operations: a client that connects and sends nothing is
// dropped when its time is up, and meanwhile the others are served.
asio::awaitable<void> Serve(HealthServer::State& state, tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  stream.expires_after(std::chrono::seconds(2));
  beast::flat_buffer buffer(8192);
  http::request_parser<http::empty_body> parser;
  parser.header_limit(8192);
  parser.body_limit(0);
  auto [read_ec, read_bytes] =
      co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
  if (!read_ec) {
    http::response<http::string_body> response = Answer(parser.get(), state.ready);
    stream.expires_after(std::chrono::seconds(2));
    co_await http::async_write(stream, response, asio::as_tuple(asio::use_awaitable));
  }
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  --state.sessions;
}

asio::awaitable<void> AcceptLoop(HealthServer::State& state) {
  while (true) {
    auto [ec, socket] = co_await state.acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted || !state.acceptor.is_open()) co_return;
    if (ec) continue;
    // At most kMaxSessions at once (each lives 4 s at most): past that, closed at once.
    if (state.sessions >= kMaxSessions) continue;
    ++state.sessions;
    asio::co_spawn(state.io, Serve(state, std::move(socket)), asio::detached);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(const std::string& address,
                                                                  ReadyCheck ready) {
  const absl::StatusOr<common::HostPort> parsed =
      common::ParseHostPort(address, {.allow_port_zero = true});
  if (!parsed.ok())
    return absl::InvalidArgumentError(common::StrCat("health: ", parsed.status().message()));
  auto state = std::make_unique<State>();
  state->ready = std::move(ready);
  beast::error_code ec;
  const asio::ip::address ip = asio::ip::make_address(parsed->host, ec);
  if (ec)
    return absl::InvalidArgumentError(
        common::StrCat("health: \"", parsed->host, "\" is not an IP address"));
  const tcp::endpoint endpoint(ip, parsed->port);
  state->acceptor.open(endpoint.protocol(), ec);
  if (!ec) state->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) state->acceptor.bind(endpoint, ec);
  if (!ec) state->acceptor.listen(16, ec);
  if (ec)
    return absl::UnavailableError(
        common::StrCat("health: cannot listen on ", address, ": ", ec.message()));
  state->port = state->acceptor.local_endpoint().port();
  asio::co_spawn(state->io, AcceptLoop(*state), asio::detached);
  State* s = state.get();
  state->thread = std::thread([s] { s->io.run(); });
  return std::unique_ptr<HealthServer>(new HealthServer(std::move(state)));
}

HealthServer::HealthServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

HealthServer::~HealthServer() {
  asio::post(state_->io, [s = state_.get()] {
    beast::error_code ec;
    s->acceptor.close(ec);
  });
  state_->io.stop();
  if (state_->thread.joinable()) state_->thread.join();
}

uint16_t HealthServer::port() const { return state_->port; }

}  // namespace podscope::agent
