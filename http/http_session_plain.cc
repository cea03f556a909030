// The session over plain TCP (http_session_impl.h instantiated for beast::tcp_stream).
#include "http/http_session_impl.h"

namespace podscope::http::sessions {

asio::awaitable<void> ServePlain(ServerState& state, tcp::socket socket, std::string peer,
                                 std::shared_ptr<ConnectionHandle> handle) {
  beast::tcp_stream stream(std::move(socket));
  const auto attached = handle->Attach([&stream] { stream.close(); });
  Session<beast::tcp_stream> session(state, stream, std::move(peer), *handle);
  co_await session.Serve();
}

asio::awaitable<void> RefusePlain(tcp::socket socket, std::string detail) {
  beast::tcp_stream stream(std::move(socket));
  beast_http::response<beast_http::string_body> out = RefusalMessage(detail);
  stream.expires_after(kLingerTime);
  co_await beast_http::async_write(stream, out, asio::as_tuple(asio::use_awaitable));
  co_await CloseGracefully(stream, /*drain=*/true);
}

}  // namespace podscope::http::sessions
