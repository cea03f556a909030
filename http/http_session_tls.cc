// The session over TLS (http_session_impl.h instantiated for beast::ssl_stream): the handshake,
// the loop over requests and the writing of a response. The rest of it is in
// http_session_tls_answer.cc and http_session_tls_stream.cc, so that no one file instantiates all
// of Beast over TLS.
#include <openssl/err.h>

#include "http/http_session_impl.h"

namespace podscope::http::sessions {

// Compiled in http_session_tls_answer.cc and http_session_tls_stream.cc.
extern template asio::awaitable<Session<TlsStream>::Outcome> Session<TlsStream>::Answer(
    beast_http::request_parser<beast_http::empty_body>&, beast::flat_buffer&);
extern template asio::awaitable<bool> Session<TlsStream>::WriteStreamed(HttpResponse&, unsigned,
                                                                        bool);

template asio::awaitable<beast::error_code> Session<TlsStream>::WriteMessage(
    beast_http::response<beast_http::string_body>&);

std::string TlsErrorText(const boost::system::error_code& ec) {
  std::string text = ec.message();
  if (ec.category() == asio::error::get_ssl_category()) {
    char buffer[256];
    ERR_error_string_n(static_cast<unsigned long>(ec.value()), buffer, sizeof(buffer));
    text = buffer;
  }
  return text;
}

asio::awaitable<void> ServeTls(ServerState& state, tcp::socket socket,
                               std::shared_ptr<asio::ssl::context> tls, std::string peer,
                               std::shared_ptr<ConnectionHandle> handle) {
  // `tls` is held for the connection's life: a reload replaces the context for new
  // connections only.
  TlsStream stream(beast::tcp_stream(std::move(socket)), *tls);
  const auto attached = handle->Attach([&stream] { stream.next_layer().close(); });
  // A client that connects and stays silent, or speaks plain HTTP to the TLS port, or trickles
  // its handshake, holds its slot for this long at most.
  stream.next_layer().expires_after(
      std::chrono::seconds(state.limits.tls_handshake_timeout_seconds));
  auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::server,
                                              asio::as_tuple(asio::use_awaitable));
  if (ec) {
    ++state.counters.tls_handshake_failures;
    state.log.Warn("http: TLS handshake with {} failed: {}", peer, TlsErrorText(ec));
    beast::error_code ignored;
    stream.next_layer().socket().close(ignored);
    co_return;
  }
  Session<TlsStream> session(state, stream, std::move(peer), *handle);
  co_await session.Serve();
}

}  // namespace podscope::http::sessions
