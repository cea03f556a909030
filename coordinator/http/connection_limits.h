// Admission of HTTP connections: a bound on all of them and a bound per client address, so that
// one client (or one host's worth of slow connections) cannot take every slot.
#pragma once

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace podscope::coordinator {

// Owned by the HTTP server; any thread (accepts and session ends run on the I/O threads).
class ConnectionLimits {
 public:
  enum class Verdict { kAdmitted, kServerFull, kClientFull };

  ConnectionLimits(uint32_t max_total, uint32_t max_per_client)
      : max_total_(max_total), max_per_client_(max_per_client) {}

  // Takes a slot for `client` (its IP address) when both bounds allow; each admission is
  // matched by one Release.
  Verdict TryAdmit(const std::string& client);
  void Release(const std::string& client);
  uint32_t open() const;
  uint32_t open_for(const std::string& client) const;

 private:
  const uint32_t max_total_;
  const uint32_t max_per_client_;
  mutable absl::Mutex mu_;
  uint32_t open_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, uint32_t> per_client_
      ABSL_GUARDED_BY(mu_);  // only clients with a slot
};

}  // namespace podscope::coordinator
