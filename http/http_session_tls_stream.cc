// A TLS session's streamed responses (Session::WriteStreamed of http_session_impl.h over
// beast::ssl_stream).
#include "http/http_session_impl.h"

namespace podscope::http::sessions {

template asio::awaitable<bool> Session<TlsStream>::WriteStreamed(HttpResponse&, unsigned, bool);

}  // namespace podscope::http::sessions
