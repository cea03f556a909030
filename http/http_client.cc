#include "http/http_client.h"

#include <netdb.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>
#include <sstream>

#include "common/client_connection.h"
#include "common/host_port.h"
#include "common/parse_number.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "http/http_types.h"

namespace podscope::http {

absl::StatusOr<ServerAddress> ParseServerUrl(const std::string& url) {
  std::string rest = url;
  ServerAddress address;
  if (rest.starts_with("http://")) {
    rest = rest.substr(7);
  } else if (rest.starts_with("https://")) {
    rest = rest.substr(8);
    address.tls = true;
    address.port = 443;
  } else if (rest.find("://") != std::string::npos) {
    return absl::InvalidArgumentError(
        common::StrCat("--server ", url, ": only http:// and https:// are supported"));
  }
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    address.base_path = rest.substr(slash);
    while (address.base_path.ends_with('/')) address.base_path.pop_back();
    rest = rest.substr(0, slash);
  }
  const absl::StatusOr<common::HostPort> authority =
      common::ParseHostPort(rest, {.default_port = address.port});
  if (!authority.ok()) {
    return absl::InvalidArgumentError(
        common::StrCat("--server ", url, ": ", authority.status().message()));
  }
  address.host = authority->host;
  address.port = authority->port;
  return address;
}

std::string UrlEncode(const std::string& value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

namespace {

// The server a redirect's Location names, with `from`'s credentials; the target (path and query)
// in `*target`. Refuses a Location that is not absolute or leaves https for http.
absl::StatusOr<ServerAddress> RedirectTarget(const ServerAddress& from, const std::string& location,
                                             std::string* target) {
  if (!location.starts_with("http://") && !location.starts_with("https://")) {
    return absl::UnavailableError(common::StrCat("redirected to \"", location.substr(0, 200),
                                                 "\", not an absolute http(s) URL"));
  }
  const size_t path_at = location.find('/', location.find("://") + 3);
  ASSIGN_OR_RETURN(ServerAddress to, ParseServerUrl(location.substr(0, path_at)));
  if (from.tls && !to.tls) {
    return absl::UnavailableError(
        common::StrCat("refusing a redirect from https to ", location.substr(0, 200)));
  }
  *target = path_at == std::string::npos ? "/" : location.substr(path_at);
  ServerAddress next = from;
  next.host = to.host;
  next.port = to.port;
  next.tls = to.tls;
  next.base_path.clear();
  return next;
}

absl::StatusOr<HttpClientResponse> HttpRequestOnce(const ServerAddress& server,
                                                   const std::string& method,
                                                   const std::string& target,
                                                   const std::string& body,
                                                   const std::string& content_type,
                                                   const std::function<void(uint64_t)>& progress);
}  // namespace

absl::StatusOr<HttpClientResponse> HttpRequestTo(const ServerAddress& server,
                                                 const std::string& method,
                                                 const std::string& target, const std::string& body,
                                                 const std::string& content_type,
                                                 const std::function<void(uint64_t)>& progress) {
  absl::StatusOr<HttpClientResponse> response =
      HttpRequestOnce(server, method, target, body, content_type, progress);
  ServerAddress at = server;
  for (int hops = 0; server.follow_redirects && response.ok() &&
                     (response->status == 307 || response->status == 308);
       ++hops) {
    if (hops == 3)
      return absl::UnavailableError(
          common::StrCat("more than 3 redirects for ", method, " ", target));
    std::string next_target;
    ASSIGN_OR_RETURN(ServerAddress next,
                     RedirectTarget(at, response->headers["location"], &next_target));
    at = std::move(next);
    response = HttpRequestOnce(at, method, next_target, body, content_type, progress);
  }
  return response;
}

namespace {
// A chunked body decoded as it arrives, each piece of data handed to a sink.
class ChunkedDecoder {
 public:
  explicit ChunkedDecoder(const std::function<absl::Status(std::string_view)>& sink)
      : sink_(sink) {}
  absl::Status Feed(std::string_view data) {
    while (!data.empty() && state_ != State::kDone) {
      if (state_ == State::kData) {
        const size_t n = std::min<uint64_t>(remaining_, data.size());
        RETURN_IF_ERROR(sink_(data.substr(0, n)));
        data.remove_prefix(n);
        remaining_ -= n;
        if (remaining_ == 0) state_ = State::kDataEnd;
        continue;
      }
      const size_t eol = data.find('\n');
      line_.append(data.substr(0, eol));
      if (line_.size() > 4096) return absl::DataLossError("a chunked body's line is too long");
      if (eol == std::string_view::npos) return absl::OkStatus();
      data.remove_prefix(eol + 1);
      std::string_view line = common::StripWhitespace(line_);
      if (state_ == State::kSize) {
        line = line.substr(0, line.find(';'));
        uint64_t size = 0;
        const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), size, 16);
        if (error != std::errc() || end != line.data() + line.size() || line.empty())
          return absl::DataLossError("a chunked body's size does not parse");
        remaining_ = size;
        state_ = size == 0 ? State::kTrailer : State::kData;
      } else if (state_ == State::kDataEnd) {
        if (!line.empty()) return absl::DataLossError("a chunk does not end where it said");
        state_ = State::kSize;
      } else if (line.empty()) {  // the trailer's end
        state_ = State::kDone;
      }
      line_.clear();
    }
    return absl::OkStatus();
  }
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kSize, kData, kDataEnd, kTrailer, kDone };
  const std::function<absl::Status(std::string_view)>& sink_;
  State state_ = State::kSize;
  uint64_t remaining_ = 0;
  std::string line_;
};

// What ReceiveResponse read: the raw answer (without its body when a sink took it), and for a
// sunk body, how it went.
struct Received {
  std::string raw;
  bool sunk = false;
  absl::Status body_status;
  bool body_complete = false;
};

// Hands a 200's body to `sink` as it arrives: de-chunked, up to its Content-Length, or to the
// end of the connection. `received->raw` keeps the header alone.
void StreamBody(common::ClientConnection& connection, const std::string& lower_head,
                size_t header_end, Received* received,
                const std::function<absl::Status(std::string_view)>& sink) {
  received->sunk = true;
  std::string first = received->raw.substr(header_end + 4);
  received->raw.resize(header_end + 4);
  const bool chunked = lower_head.find("\r\ntransfer-encoding: chunked") != std::string::npos ||
                       lower_head.find("\r\ntransfer-encoding:chunked") != std::string::npos;
  std::optional<uint64_t> length;
  if (const size_t at = lower_head.find("\r\ncontent-length:");
      !chunked && at != std::string::npos) {
    const size_t value = at + std::string_view("\r\ncontent-length:").size();
    const absl::StatusOr<int64_t> n = common::ParseInt(common::StripWhitespace(
        std::string_view(lower_head).substr(value, lower_head.find("\r\n", value) - value)));
    if (n.ok() && *n >= 0) length = static_cast<uint64_t>(*n);
  }
  ChunkedDecoder decoder(sink);
  uint64_t delivered = 0;
  auto feed = [&](std::string_view data) -> absl::Status {
    if (chunked) return decoder.Feed(data);
    if (length) data = data.substr(0, std::min<uint64_t>(data.size(), *length - delivered));
    delivered += data.size();
    return data.empty() ? absl::OkStatus() : sink(data);
  };
  auto complete = [&] { return chunked ? decoder.done() : length && delivered == *length; };
  received->body_status = feed(first);
  char buffer[65536];
  while (received->body_status.ok() && !complete()) {
    const size_t n = connection.Receive(buffer, sizeof(buffer));
    if (n == 0) break;
    received->body_status = feed(std::string_view(buffer, n));
  }
  // Without a length or chunks, the body ends with the connection.
  received->body_complete = complete() || (!chunked && !length && connection.stopped().ok());
}

// Reads the response up to its Content-Length, or to the end of the connection when it has none
// (chunked, or a server that closes): a server that answers "Connection: close" but waits for
// the client to hang up first (chromedriver does) costs nothing then. Interim 1xx answers are
// skipped; 204, 304 and answers to HEAD end with their header, whatever length they announce.
// A 200's body goes to `sink` instead when one is given (StreamBody).
Received ReceiveResponse(common::ClientConnection& connection, size_t max_bytes,
                         std::string_view method,
                         const std::function<absl::Status(std::string_view)>& sink) {
  Received received;
  std::string& out = received.raw;
  char buffer[65536];
  std::optional<uint64_t> expected;  // header and body bytes, once the header has said
  bool header_seen = false;
  while (out.size() < max_bytes && (!expected || out.size() < *expected)) {
    const size_t n = connection.Receive(buffer, std::min(sizeof(buffer), max_bytes - out.size()));
    if (n == 0) break;
    out.append(buffer, n);
    while (!header_seen) {
      const size_t header_end = out.find("\r\n\r\n");
      if (header_end == std::string::npos) break;
      std::string head = out.substr(0, header_end);
      for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const absl::StatusOr<int64_t> status =
          head.size() >= 12 ? common::ParseInt(std::string_view(head).substr(9, 3))
                            : absl::StatusOr<int64_t>(0);
      if (status.ok() && *status >= 100 && *status < 200) {
        out.erase(0, header_end + 4);  // "100 Continue" and the like: the answer follows
        continue;
      }
      header_seen = true;
      if (sink && status.ok() && *status == 200 && method != "HEAD") {
        StreamBody(connection, head, header_end, &received, sink);
        return received;
      }
      if ((status.ok() && (*status == 204 || *status == 304)) || method == "HEAD") {
        expected = header_end + 4;
        break;
      }
      if (head.find("\r\ntransfer-encoding:") != std::string::npos) break;
      const size_t at = head.find("\r\ncontent-length:");
      if (at == std::string::npos) break;
      const size_t value = at + std::string_view("\r\ncontent-length:").size();
      const absl::StatusOr<int64_t> length = common::ParseInt(common::StripWhitespace(
          std::string_view(head).substr(value, head.find("\r\n", value) - value)));
      if (length.ok() && *length >= 0) expected = header_end + 4 + static_cast<uint64_t>(*length);
    }
  }
  if (expected && out.size() > *expected) out.resize(*expected);
  return received;
}

absl::StatusOr<HttpClientResponse> HttpRequestOnce(const ServerAddress& server,
                                                   const std::string& method,
                                                   const std::string& target,
                                                   const std::string& body,
                                                   const std::string& content_type,
                                                   const std::function<void(uint64_t)>& progress) {
  common::ExchangeBounds bounds{.cancel = server.cancel};
  if (server.deadline_ms > 0) {
    bounds.deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(server.deadline_ms);
  }
  absl::StatusOr<common::ClientConnection> connection = common::ClientConnection::Connect(
      server.host, server.port, {.enabled = server.tls, .ca_file = server.ca_file},
      server.timeout_seconds, bounds);
  if (!connection.ok()) {
    if (!server.tls || connection.status().code() == absl::StatusCode::kInvalidArgument)
      return connection.status();
    return absl::UnavailableError(
        common::StrCat(connection.status().message(),
                       server.ca_file.empty() ? " (a private CA? give --ca-cert FILE)" : ""));
  }
  std::ostringstream head;
  head << method << " " << target
       << " HTTP/1.1\r\nHost: " << common::JoinHostPort(server.host, server.port)
       << "\r\nUser-Agent: " << server.user_agent << "\r\nConnection: close\r\n";
  if (!server.token.empty()) head << "Authorization: Bearer " << server.token << "\r\n";
  if (!content_type.empty()) head << "Content-Type: " << content_type << "\r\n";
  for (const auto& [name, value] : server.headers) head << name << ": " << value << "\r\n";
  if (!body.empty() || method == "POST" || method == "PUT")
    head << "Content-Length: " << body.size() << "\r\n";
  head << "\r\n";
  // The body goes in pieces so that progress can be reported. When a send fails the server may
  // have answered early (a 413, a 401) and closed: its answer is read below all the same.
  if (connection->Send(head.str())) {
    constexpr size_t kPiece = 1 << 20;
    for (size_t sent = 0; sent < body.size();) {
      const size_t n = std::min(kPiece, body.size() - sent);
      if (!connection->Send(std::string_view(body).substr(sent, n))) break;
      sent += n;
      if (progress) progress(sent);
    }
  }
  const Received received =
      ReceiveResponse(*connection, server.max_response_bytes, method, server.body_sink);
  const std::string& raw = received.raw;
  if (const absl::Status& stopped = connection->stopped(); !stopped.ok()) {
    return absl::Status(
        stopped.code(),
        common::StrCat(common::JoinHostPort(server.host, server.port), ": ", stopped.message()));
  }
  const size_t header_end = raw.find("\r\n\r\n");
  if (raw.size() < 12 || header_end == std::string::npos || !raw.starts_with("HTTP/1.")) {
    // Plain HTTP to a TLS port: the server answers with a TLS alert record (content type 21,
    // version 3.x) or closes without a word.
    const bool tls_record = raw.size() >= 2 && (raw[0] == 0x15 || raw[0] == 0x16) && raw[1] == 0x03;
    if (!server.tls && (tls_record || raw.empty())) {
      return absl::UnavailableError(common::StrCat(
          common::JoinHostPort(server.host, server.port),
          tls_record ? " answered in TLS, not plain HTTP"
                     : " closed the connection without an HTTP answer",
          ": if it serves HTTPS, use https://", common::JoinHostPort(server.host, server.port)));
    }
    return absl::UnavailableError(common::StrCat("no valid HTTP response from ",
                                                 common::JoinHostPort(server.host, server.port)));
  }
  HttpClientResponse response;
  const absl::StatusOr<int64_t> status = common::ParseInt(std::string_view(raw).substr(9, 3));
  if (!status.ok())
    return absl::UnavailableError(common::StrCat("no valid HTTP status from ",
                                                 common::JoinHostPort(server.host, server.port)));
  response.status = static_cast<int>(*status);
  std::istringstream lines(raw.substr(0, header_end));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value(common::StripWhitespace(line.substr(colon + 1)));
    response.headers[name] = value;
  }
  response.body = raw.substr(header_end + 4);
  if (received.sunk) {
    if (!received.body_status.ok()) return received.body_status;
    if (!received.body_complete) {
      return absl::DataLossError(
          common::StrCat("the response from ", common::JoinHostPort(server.host, server.port),
                         " was cut short (the server failed while sending it)"));
    }
    return response;
  }
  // Reading stopped at the bound: the rest was never read.
  response.truncated =
      server.max_response_bytes != SIZE_MAX && raw.size() >= server.max_response_bytes;
  if (response.truncated) return response;
  if (response.headers["transfer-encoding"] == "chunked") {
    std::string body;
    if (!DecodeChunkedBody(response.body, &body)) {
      return absl::DataLossError(
          common::StrCat("the response from ", common::JoinHostPort(server.host, server.port),
                         " was cut short (the server failed while sending it)"));
    }
    response.body = std::move(body);
  } else if (const auto length = response.headers.find("content-length");
             length != response.headers.end() && response.status != 204 && response.status != 304 &&
             method != "HEAD") {
    const absl::StatusOr<int64_t> n = common::ParseInt(length->second);
    if (n.ok() && static_cast<uint64_t>(*n) > response.body.size()) {
      return absl::DataLossError(
          common::StrCat("the response from ", common::JoinHostPort(server.host, server.port),
                         " was cut short (", response.body.size(), " of ", *n, " bytes)"));
    }
  }
  return response;
}
}  // namespace

std::string ProblemDetail(const HttpClientResponse& r) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view detail;
  if (parser.parse(r.body).get(doc) == simdjson::SUCCESS &&
      doc["detail"].get_string().get(detail) == simdjson::SUCCESS) {
    return common::StrCat("HTTP ", r.status, ": ", detail);
  }
  return common::StrCat("HTTP ", r.status, ": ", r.body.substr(0, 500));
}

}  // namespace podscope::http
