#include "coordinator/cli/http_client.h"

#include "coordinator/http/http_types.h"

#include <simdjson.h>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include "common/str_util.h"

namespace podscope::coordinator {

absl::StatusOr<ServerAddress> ParseServerUrl(const std::string& url) {
  std::string rest = url;
  if (rest.starts_with("http://")) {
    rest = rest.substr(7);
  } else if (rest.find("://") != std::string::npos) {
    return absl::InvalidArgumentError(common::StrCat("--server ", url, ": only http:// is supported"));
  }
  rest = rest.substr(0, rest.find('/'));
  ServerAddress address;
  const size_t colon = rest.rfind(':');
  address.host = colon == std::string::npos ? rest : rest.substr(0, colon);
  if (colon != std::string::npos) {
    try {
      const int port = std::stoi(rest.substr(colon + 1));
      if (port <= 0 || port > 65535) throw std::out_of_range("port");
      address.port = static_cast<uint16_t>(port);
    } catch (const std::exception&) {
      return absl::InvalidArgumentError(common::StrCat("--server ", url, ": bad port"));
    }
  }
  if (address.host.empty()) return absl::InvalidArgumentError(common::StrCat("--server ", url, ": no host"));
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

absl::StatusOr<HttpClientResponse> HttpRequestTo(const ServerAddress& server, const std::string& method,
                                                 const std::string& target, const std::string& body,
                                                 const std::string& content_type,
                                                 const std::function<void(uint64_t)>& progress) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(server.host.c_str(), std::to_string(server.port).c_str(), &hints, &found) != 0 || found == nullptr) {
    return absl::UnavailableError(common::StrCat("cannot resolve ", server.host));
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(common::StrCat("cannot connect to ", server.host, ":", server.port, ": ", std::strerror(errno)));
  }
  timeval timeout{60, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  std::ostringstream head;
  head << method << " " << target << " HTTP/1.1\r\nHost: " << server.host << ":" << server.port
       << "\r\nUser-Agent: podscope-cli\r\nConnection: close\r\n";
  if (!content_type.empty()) head << "Content-Type: " << content_type << "\r\n";
  if (!body.empty() || method == "POST" || method == "PUT") head << "Content-Length: " << body.size() << "\r\n";
  head << "\r\n";
  auto send_all = [fd](const char* data, size_t size, const std::function<void(uint64_t)>* report) {
    size_t sent = 0;
    while (sent < size) {
      const ssize_t n = send(fd, data + sent, std::min<size_t>(size - sent, 1 << 20), MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
      if (report != nullptr && *report) (*report)(sent);
    }
    return true;
  };
  const std::string header = head.str();
  if (!send_all(header.data(), header.size(), nullptr) || !send_all(body.data(), body.size(), &progress)) {
    // The server may have answered early (e.g. 413) and closed: read what it said.
  }
  std::string raw;
  char buf[65536];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) raw.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t header_end = raw.find("\r\n\r\n");
  if (raw.size() < 12 || header_end == std::string::npos || !raw.starts_with("HTTP/1.")) {
    return absl::UnavailableError(common::StrCat("no valid HTTP response from ", server.host, ":", server.port));
  }
  HttpClientResponse response;
  response.status = std::atoi(raw.substr(9, 3).c_str());
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
  if (response.headers["transfer-encoding"] == "chunked") {
    std::string body;
    if (!DecodeChunkedBody(response.body, &body)) {
      return absl::DataLossError(common::StrCat("the response from ", server.host, ":", server.port,
                                                " was cut short (the server failed while sending it)"));
    }
    response.body = std::move(body);
  }
  return response;
}

std::string ProblemDetail(const HttpClientResponse& r) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view detail;
  if (parser.parse(r.body).get(doc) == simdjson::SUCCESS && doc["detail"].get_string().get(detail) == simdjson::SUCCESS) {
    return common::StrCat("HTTP ", r.status, ": ", detail);
  }
  return common::StrCat("HTTP ", r.status, ": ", r.body.substr(0, 500));
}

}  // namespace podscope::coordinator
