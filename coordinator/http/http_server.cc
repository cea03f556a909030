#include "coordinator/http/http_server.h"

#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "common/str_util.h"

namespace podscope::coordinator {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class HttpServer::Impl {
 public:
  Impl(const Router& router, HttpLimits limits) : router_(router), limits_(std::move(limits)) {}

  absl::StatusOr<uint16_t> Start(const std::string& host, uint16_t port) {
    boost::system::error_code ec;
    const asio::ip::address address = asio::ip::make_address(host, ec);
    if (ec) return absl::InvalidArgumentError(common::StrCat("bad listen address \"", host, "\": ", ec.message()));
    const tcp::endpoint endpoint(address, port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(common::StrCat("cannot listen on ", host, ":", port, ": ", ec.message()));
    }
    const uint16_t bound = acceptor_.local_endpoint().port();
    asio::co_spawn(io_, Accept(), asio::detached);
    for (int i = 0; i < std::max(1, limits_.io_threads); ++i) {
      threads_.emplace_back([this] { RunNamed(io_, kIoThreadName); });
    }
    for (int i = 0; i < std::max(1, limits_.heavy_threads); ++i) {
      heavy_threads_.emplace_back([this] { RunNamed(heavy_, kHeavyThreadName); });
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
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_seconds);
    while (in_flight_.load() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    io_.stop();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    heavy_work_.reset();
    heavy_.stop();
    for (std::thread& t : heavy_threads_) t.join();
    heavy_threads_.clear();
  }

  HttpCounters counters;

 private:
  static void RunNamed(asio::io_context& context, const char* name) {
    pthread_setname_np(pthread_self(), name);
    context.run();
  }

  asio::awaitable<void> Accept() {
    while (acceptor_.is_open()) {
      auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
        continue;
      }
      if (counters.open_connections.load() >= limits_.max_connections) {
        ++counters.rejected_connections;
        boost::system::error_code ignored;
        socket.close(ignored);  // over the connection bound: refuse rather than queue forever
        continue;
      }
      asio::co_spawn(io_, Session(std::move(socket)), asio::detached);
    }
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

  asio::awaitable<void> Session(tcp::socket socket) {
    ++counters.open_connections;
    boost::system::error_code peer_ec;
    const tcp::endpoint remote = socket.remote_endpoint(peer_ec);
    const std::string peer = peer_ec ? std::string("?") : common::StrCat(remote.address().to_string(), ":", remote.port());
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    while (true) {
      stream.expires_after(std::chrono::seconds(limits_.idle_timeout_seconds));
      http::request_parser<http::empty_body> header_parser;
      header_parser.header_limit(limits_.max_header_bytes);
      header_parser.body_limit(boost::none);
      auto [ec, n] = co_await http::async_read_header(stream, buffer, header_parser, asio::as_tuple(asio::use_awaitable));
      if (ec) break;
      const auto start = std::chrono::steady_clock::now();
      ++in_flight_;
      ++counters.requests;
      bool ok = true;
      HttpRequest request = ToRequest(header_parser.get(), &ok);
      request.peer = peer;
      const unsigned version = header_parser.get().version();
      const bool keep_alive = header_parser.get().keep_alive();
      HttpResponse response;
      bool path_known = false;
      const Route* route = ok ? router_.Match(request.method, request.path, &request.params, &path_known) : nullptr;
      bool read_body_ok = true;
      std::string upload_path;
      if (!ok) {
        response = HttpResponse::Problem(400, "Bad Request", "malformed percent-encoding in the request target");
      } else if (route == nullptr) {
        response = path_known ? HttpResponse::Problem(405, "Method Not Allowed", common::StrCat(request.method, " is not allowed on ", request.path))
                              : HttpResponse::Problem(404, "Not Found", common::StrCat("no route for ", request.path));
      }
      // Read the body, within its bound. A declared length over the bound is refused before
      // reading anything (the limits set on the header parser are checked at header time).
      const uint64_t limit = route != nullptr && route->streamed_upload ? limits_.max_upload_bytes : limits_.max_body_bytes;
      const auto declared = header_parser.content_length();
      if (route != nullptr && declared && *declared > limit) {
        response = HttpResponse::Problem(413, "Payload Too Large",
                                         common::StrCat(route->streamed_upload ? "uploads" : "request bodies",
                                                        " are limited to ", limit, " bytes"));
        read_body_ok = false;
        route = nullptr;
      }
      if (!read_body_ok) {
        // Nothing more is read from this connection: it is closed after the response.
      } else if (route != nullptr && route->streamed_upload) {
        upload_path = common::StrCat(limits_.upload_dir, "/podscope-upload-", getpid(), "-", next_upload_++, ".part");
        http::request_parser<http::file_body> parser(std::move(header_parser));
        parser.body_limit(limits_.max_upload_bytes);
        beast::error_code file_ec;
        parser.get().body().open(upload_path.c_str(), beast::file_mode::write, file_ec);
        if (file_ec) {
          response = HttpResponse::Problem(500, "Internal Server Error", common::StrCat("cannot stage the upload: ", file_ec.message()));
          read_body_ok = false;
        } else {
          stream.expires_after(std::chrono::seconds(std::max<uint32_t>(limits_.idle_timeout_seconds, 600)));
          auto [read_ec, bytes] = co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
          parser.get().body().close();
          if (read_ec == http::error::body_limit) {
            response = HttpResponse::Problem(413, "Payload Too Large", common::StrCat("uploads are limited to ", limits_.max_upload_bytes, " bytes"));
            read_body_ok = false;
          } else if (read_ec) {
            read_body_ok = false;
            response = HttpResponse::Problem(400, "Bad Request", common::StrCat("upload interrupted: ", read_ec.message()));
          } else {
            request.body_file = upload_path;
          }
        }
      } else if (route == nullptr) {
        read_body_ok = false;  // an unrouted request's body is not read: close after answering
      } else if (header_parser.get().has_content_length() || header_parser.get().chunked()) {
        http::request_parser<http::string_body> parser(std::move(header_parser));
        parser.body_limit(limits_.max_body_bytes);
        auto [read_ec, bytes] = co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
        if (read_ec == http::error::body_limit) {
          response = HttpResponse::Problem(413, "Payload Too Large", common::StrCat("request bodies are limited to ", limits_.max_body_bytes, " bytes"));
          read_body_ok = false;
        } else if (read_ec) {
          read_body_ok = false;
          response = HttpResponse::Problem(400, "Bad Request", common::StrCat("request body: ", read_ec.message()));
        } else {
          request.body = std::move(parser.get().body());
        }
      }
      if (route != nullptr && read_body_ok) {
        if (route->heavy) {
          // The handler runs as its own coroutine on the heavy pool; this one resumes on the
          // I/O threads when it is done. (Posting to the pool and awaiting the post would
          // resume here, on an I/O thread, and run the handler there.)
          response = co_await asio::co_spawn(
              heavy_, [this, route, &request]() -> asio::awaitable<HttpResponse> { co_return Invoke(*route, request); },
              asio::use_awaitable);
        } else {
          response = Invoke(*route, request);
        }
      }
      if (!upload_path.empty()) {
        std::error_code ignored;
        std::filesystem::remove(upload_path, ignored);
      }
      http::response<http::string_body> out{static_cast<http::status>(response.status), version};
      out.set(http::field::server, "podscope");
      out.set(http::field::content_type, response.content_type);
      for (const auto& [name, value] : response.headers) out.set(name, value);
      out.body() = std::move(response.body);
      out.keep_alive(keep_alive && read_body_ok);
      out.prepare_payload();
      stream.expires_after(std::chrono::seconds(std::max<uint32_t>(limits_.idle_timeout_seconds, 600)));
      auto [write_ec, written] = co_await http::async_write(stream, out, asio::as_tuple(asio::use_awaitable));
      Count(response.status, start);
      --in_flight_;
      if (write_ec || !out.keep_alive()) break;
    }
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    --counters.open_connections;
  }

  HttpResponse Invoke(const Route& route, HttpRequest& request) {
    try {
      return route.handler(request);
    } catch (const std::exception& e) {
      return HttpResponse::Problem(500, "Internal Server Error", e.what());
    }
  }

  void Count(int status, std::chrono::steady_clock::time_point start) {
    (status < 300 ? counters.responses_2xx : status < 500 ? counters.responses_4xx : counters.responses_5xx)++;
    counters.latency_ns_total += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  }

  const Router& router_;
  HttpLimits limits_;
  asio::io_context io_;
  tcp::acceptor acceptor_{io_};
  // Heavy handlers (imports, exports, analyses) run here, never on the I/O threads.
  asio::io_context heavy_;
  asio::executor_work_guard<asio::io_context::executor_type> heavy_work_ = asio::make_work_guard(heavy_);
  std::vector<std::thread> threads_;
  std::vector<std::thread> heavy_threads_;
  std::atomic<bool> stopped_{false};
  std::atomic<int> in_flight_{0};
  std::atomic<uint64_t> next_upload_{0};
};

HttpServer::HttpServer(const Router& router, HttpLimits limits) : impl_(std::make_unique<Impl>(router, std::move(limits))) {}
HttpServer::~HttpServer() { impl_->Stop(0); }
absl::StatusOr<uint16_t> HttpServer::Start(const std::string& host, uint16_t port) { return impl_->Start(host, port); }
void HttpServer::Stop(int grace_seconds) { impl_->Stop(grace_seconds); }
const HttpCounters& HttpServer::counters() const { return impl_->counters; }

}  // namespace podscope::coordinator
