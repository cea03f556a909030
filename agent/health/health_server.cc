#include "agent/health/health_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <thread>

#include "common/parse_number.h"
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
  std::thread thread;
};

namespace {

void Serve(HealthServer::ReadyCheck& ready, tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  stream.expires_after(std::chrono::seconds(2));
  beast::flat_buffer buffer(8192);
  http::request_parser<http::empty_body> parser;
  parser.header_limit(8192);
  parser.body_limit(0);
  beast::error_code ec;
  http::read(stream, buffer, parser, ec);
  if (ec) return;
  const http::request<http::empty_body>& request = parser.get();
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
  http::write(stream, response, ec);
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
}

void Accept(HealthServer::ReadyCheck& ready, tcp::acceptor& acceptor) {
  acceptor.async_accept([&ready, &acceptor](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) Serve(ready, std::move(socket));
    Accept(ready, acceptor);
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(const std::string& address, ReadyCheck ready) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError(common::StrCat("health: \"", address, "\" is not HOST:PORT"));
  absl::StatusOr<int64_t> port = common::ParseInt(std::string_view(address).substr(colon + 1));
  if (!port.ok() || *port < 0 || *port > 65535) {
    return absl::InvalidArgumentError(common::StrCat("health: \"", address, "\" has no valid port"));
  }
  auto state = std::make_unique<State>();
  state->ready = std::move(ready);
  beast::error_code ec;
  const asio::ip::address ip = asio::ip::make_address(address.substr(0, colon), ec);
  if (ec) return absl::InvalidArgumentError(common::StrCat("health: \"", address.substr(0, colon), "\" is not an IP address"));
  const tcp::endpoint endpoint(ip, static_cast<uint16_t>(*port));
  state->acceptor.open(endpoint.protocol(), ec);
  if (!ec) state->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) state->acceptor.bind(endpoint, ec);
  if (!ec) state->acceptor.listen(16, ec);
  if (ec) return absl::UnavailableError(common::StrCat("health: cannot listen on ", address, ": ", ec.message()));
  state->port = state->acceptor.local_endpoint().port();
  Accept(state->ready, state->acceptor);
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
