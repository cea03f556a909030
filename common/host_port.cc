#include "common/host_port.h"

#include <arpa/inet.h>

#include <algorithm>

#include "common/parse_number.h"
#include "common/str_util.h"

namespace podscope::common {
namespace {

constexpr size_t kMaxLength = 512;

// Letters, digits and the punctuation of host names and IPv4/IPv6 addresses; an IPv6 zone
// ("fe80::1%eth0") keeps its '%'.
bool HostCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == ':' || c == '%';
}

absl::Status Bad(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(
      StrCat("\"", text.substr(0, 64), text.size() > 64 ? "…" : "", "\" ", why));
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(std::string_view text, HostPortRules rules) {
  if (text.size() > kMaxLength) return Bad(text, "is longer than 512 characters");
  std::string_view host = text, port_text;
  bool has_port = false;
  if (text.starts_with('[')) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return Bad(text, "opens '[' without closing it");
    host = text.substr(1, close - 1);
    const std::string_view after = text.substr(close + 1);
    if (!after.empty()) {
      if (!after.starts_with(':')) return Bad(text, "has something after ']' that is not :PORT");
      port_text = after.substr(1);
      has_port = true;
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    if (host.find(':') != std::string_view::npos)
      return Bad(text, "is an IPv6 address without brackets: write [ADDRESS]:PORT");
    port_text = text.substr(colon + 1);
    has_port = true;
  }
  if (host.empty()) return Bad(text, "has no host: write HOST:PORT");
  if (!std::all_of(host.begin(), host.end(), HostCharacter))
    return Bad(text, "has a character no host name or address has");
  HostPort out{std::string(host), rules.default_port};
  if (!has_port) {
    if (rules.default_port == 0) return Bad(text, "has no port: write HOST:PORT");
    return out;
  }
  const absl::StatusOr<int64_t> port = ParseInt(port_text);
  const int64_t lowest = rules.allow_port_zero ? 0 : 1;
  if (!port.ok() || *port < lowest || *port > 65535) {
    return Bad(text, StrCat("has no valid port: the port is a number from ", lowest, " to 65535"));
  }
  out.port = static_cast<uint16_t>(*port);
  return out;
}

std::string JoinHostPort(std::string_view host, uint16_t port) {
  if (host.find(':') != std::string_view::npos) return StrCat("[", host, "]:", port);
  return StrCat(host, ":", port);
}

bool IsIpAddress(std::string_view host) {
  const std::string text(host);
  in6_addr v6;
  in_addr v4;
  return inet_pton(AF_INET, text.c_str(), &v4) == 1 || inet_pton(AF_INET6, text.c_str(), &v6) == 1;
}

}  // namespace podscope::common
