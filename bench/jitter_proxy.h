// A TCP proxy that delays every chunk it forwards by base + uniform(0, jitter), independently
// per direction and in order: a stand-in for `tc netem` between network namespaces (which
// needs privileges a benchmark machine may not grant) to measure clock alignment under a bad
// network. Runs its own thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace podscope::bench {

class JitterProxy {
 public:
  // Forwards 127.0.0.1:port() to target_host:target_port.
  JitterProxy(std::string target_host, uint16_t target_port, int64_t base_delay_ns,
              int64_t jitter_ns, uint64_t seed);
  ~JitterProxy();
  uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace podscope::bench
