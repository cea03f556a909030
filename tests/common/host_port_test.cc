#include "common/host_port.h"

#include <gtest/gtest.h>

#include <string>

namespace podscope::common {
namespace {

HostPort Parsed(std::string_view text, HostPortRules rules = {}) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(text, rules);
  EXPECT_TRUE(parsed.ok()) << text << ": " << parsed.status();
  return parsed.value_or(HostPort{});
}

std::string Why(std::string_view text, HostPortRules rules = {}) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(text, rules);
  EXPECT_FALSE(parsed.ok()) << text << " parsed as " << parsed->host << " port " << parsed->port;
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(parsed.status().message());
}

TEST(HostPortTest, NamesAddressesAndBracketedIpv6) {
  EXPECT_EQ(Parsed("node-0:50051"), (HostPort{"node-0", 50051}));
  EXPECT_EQ(Parsed("10.0.0.1:8080"), (HostPort{"10.0.0.1", 8080}));
  EXPECT_EQ(Parsed("[::1]:8080"), (HostPort{"::1", 8080}));
  EXPECT_EQ(Parsed("[fe80::1%eth0]:1"), (HostPort{"fe80::1%eth0", 1}));
  EXPECT_EQ(Parsed("coordinator.podscope.svc.cluster.local:65535").port, 65535);
  // Port 0 only where it means "any free port".
  EXPECT_EQ(Parsed("127.0.0.1:0", {.allow_port_zero = true}), (HostPort{"127.0.0.1", 0}));
  // A URL's authority without a port takes the scheme's.
  EXPECT_EQ(Parsed("example.com", {.default_port = 443}), (HostPort{"example.com", 443}));
  EXPECT_EQ(Parsed("[::1]", {.default_port = 80}), (HostPort{"::1", 80}));
}

TEST(HostPortTest, WhatIsRefusedIsNamedWithWhy) {
  EXPECT_EQ(Why("node-0"), "\"node-0\" has no port: write HOST:PORT");
  EXPECT_EQ(Why(":8080"), "\":8080\" has no host: write HOST:PORT");
  EXPECT_EQ(Why("[]:8080"), "\"[]:8080\" has no host: write HOST:PORT");
  EXPECT_EQ(Why("::1:8080"),
            "\"::1:8080\" is an IPv6 address without brackets: write [ADDRESS]:PORT");
  EXPECT_EQ(Why("[::1:8080"), "\"[::1:8080\" opens '[' without closing it");
  EXPECT_EQ(Why("[::1]8080"), "\"[::1]8080\" has something after ']' that is not :PORT");
  EXPECT_EQ(Why("host:0"), "\"host:0\" has no valid port: the port is a number from 1 to 65535");
  EXPECT_EQ(Why("host:65536", {.allow_port_zero = true}),
            "\"host:65536\" has no valid port: the port is a number from 0 to 65535");
  for (std::string_view bad : {"host:", "host:-1", "host:+80", "host: 80", "host:80 ", "host:0x50",
                               "host:99999999999999999999"}) {
    EXPECT_NE(Why(bad).find("has no valid port"), std::string::npos) << bad;
  }
  // What an attacker or a typo puts in a host.
  for (std::string_view bad : std::initializer_list<std::string_view>{
           "user@host:80", "host/path:80", "ho st:80", "host\n:80",
           std::string_view("ho\0st:80", 8), "https://host:80"}) {
    EXPECT_FALSE(ParseHostPort(bad).ok()) << bad;
  }
  EXPECT_EQ(Why(std::string(600, 'a') + ":80"),
            "\"" + std::string(64, 'a') + "…\" is longer than 512 characters");
  EXPECT_EQ(Why(""), "\"\" has no host: write HOST:PORT");
}

TEST(HostPortTest, JoinReadsBack) {
  EXPECT_EQ(JoinHostPort("node-0", 50051), "node-0:50051");
  EXPECT_EQ(JoinHostPort("::1", 8080), "[::1]:8080");
  for (const HostPort& hp :
       {HostPort{"node-0", 1}, HostPort{"::1", 8080}, HostPort{"10.0.0.1", 0}}) {
    EXPECT_EQ(Parsed(JoinHostPort(hp.host, hp.port), {.allow_port_zero = true}), hp);
  }
}

TEST(HostPortTest, AnAddressIsToldFromAName) {
  for (const char* address : {"127.0.0.1", "0.0.0.0", "::", "::1", "fe80::1", "10.1.2.3"})
    EXPECT_TRUE(IsIpAddress(address)) << address;
  for (const char* name : {"localhost", "node-0", "256.1.1.1", "1.2.3", "[::1]", "", "10.0.0.1 "})
    EXPECT_FALSE(IsIpAddress(name)) << name;
}

}  // namespace
}  // namespace podscope::common
