// The session over plain TCP (http_session_impl.h instantiated for beast::tcp_stream).
#include "coordinator/http/http_session_impl.h"

namespace podscope::coordinator::http_session {

asio::awaitable<void> ServePlain(ServerState& state, tcp::socket socket, std::string peer) {
  beast::tcp_stream stream(std::move(socket));
  Session<beast::tcp_stream> session(state, stream, std::move(peer));
  co_await session.Serve();
}

asio::awaitable<void> RefusePlain(tcp::socket socket, std::string detail) {
  beast::tcp_stream stream(std::move(socket));
  http::response<http::string_body> out = RefusalMessage(detail);
  stream.expires_after(kLingerTime);
  co_await http::async_write(stream, out, asio::as_tuple(asio::use_awaitable));
  co_await CloseGracefully(stream, /*drain=*/true);
}

}  // namespace podscope::coordinator::http_session
