// A TLS session's answer to one request: its body read, its handler run (Session::Answer of
// http_session_impl.h over beast::ssl_stream); and the refusal of a connection over TLS.
#include "http/http_session_impl.h"

namespace podscope::http::sessions {

// Compiled in http_session_tls.cc and http_session_tls_stream.cc.
extern template asio::awaitable<beast::error_code> Session<TlsStream>::WriteMessage(
    beast_http::response<beast_http::string_body>&);
extern template asio::awaitable<bool> Session<TlsStream>::WriteStreamed(HttpResponse&, unsigned,
                                                                        bool);

template asio::awaitable<Session<TlsStream>::Outcome> Session<TlsStream>::Answer(
    beast_http::request_parser<beast_http::empty_body>&, beast::flat_buffer&);

asio::awaitable<void> RefuseTls(tcp::socket socket, std::shared_ptr<asio::ssl::context> tls,
                                std::string detail) {
  beast::tcp_stream plain(std::move(socket));
  beast_http::response<beast_http::string_body> out = RefusalMessage(detail);
  plain.expires_after(kLingerTime);
  TlsStream stream(std::move(plain), *tls);
  auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::server,
                                              asio::as_tuple(asio::use_awaitable));
  if (!ec) {
    co_await beast_http::async_write(stream, out, asio::as_tuple(asio::use_awaitable));
    co_await CloseGracefully(stream, /*drain=*/true);
  }
}

}  // namespace podscope::http::sessions
