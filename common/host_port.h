// HOST:PORT, as every flag, config key and URL in podscope writes an address: a name or an IPv4
// address, or an IPv6 address in brackets ([::1]:8080), then a port. One parser, so that every
// place accepts and refuses the same text and says why in the same words.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace podscope::common {

struct HostPort {
  std::string host;  // without brackets: "::1", "node-0", "10.0.0.1"
  uint16_t port = 0;
  friend bool operator==(const HostPort&, const HostPort&) = default;
};

struct HostPortRules {
  // Port 0: for an address to listen on, "any free port".
  bool allow_port_zero = false;
  // Text without ":PORT" (a URL's authority) gets this port; 0: the port is required.
  uint16_t default_port = 0;
};

// Errors name the text and what is wrong with it: no port, a port outside 1-65535 (0-65535 with
// allow_port_zero), no host, an IPv6 address without brackets, a character no host name or
// address has, more than 512 characters.
absl::StatusOr<HostPort> ParseHostPort(std::string_view text, HostPortRules rules = {});

// Whether `host` is an IPv4 or IPv6 address (without brackets), not a name.
bool IsIpAddress(std::string_view host);

// "host:port", with an IPv6 host in brackets: what ParseHostPort reads back.
std::string JoinHostPort(std::string_view host, uint16_t port);

}  // namespace podscope::common
