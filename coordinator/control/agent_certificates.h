// Mutual TLS on the agents' port (docs/security.md): the coordinator accepts an agent only when its
// certificate chains to the configured CA and is valid now, and each refusal is logged (with the
// certificate's name and OpenSSL's reason) and counted. gRPC's TLS layer is told to ask for a
// client certificate but leave its verification to AgentCertificates, because a handshake gRPC
// refuses by itself is neither seen nor counted.
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/tls_files.h"
#include "http/rate_limited_log.h"

typedef struct x509_store_st X509_STORE;

namespace podscope::coordinator {

// Thread-safe: gRPC verifies handshakes on its own threads.
class AgentCertificates {
 public:
  explicit AgentCertificates(std::string ca_file);
  ~AgentCertificates();
  // (Re)reads the CA file; on an error the old CA stays.
  absl::Status Load();
  // Whether `leaf_pem` is a client certificate chaining to the CA (through any of `chain_pem`'s
  // certificates, in any order) and valid now; otherwise why not ("certificate has expired").
  // Counts and logs refusals.
  bool Verify(std::string_view leaf_pem, std::string_view chain_pem, std::string* reason);
  // Prometheus text: podscope_grpc_refused_handshakes_total{reason}.
  void AppendMetrics(std::string* out) const;

 private:
  const std::string ca_file_;
  mutable absl::Mutex mu_;
  X509_STORE* store_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::map<std::string, uint64_t> refused_
      ABSL_GUARDED_BY(mu_);  // by reason (a handful of OpenSSL's)
  http::RateLimitedLog log_{"grpc tls"};
};

// The agents' port's credentials: this coordinator's certificate and key (re-read from their
// files every `refresh_seconds`), a client certificate required, verified by `certificates`
// (which must outlive the server).
std::shared_ptr<grpc::ServerCredentials> AgentServerCredentials(const common::TlsFiles& files,
                                                                AgentCertificates& certificates,
                                                                unsigned refresh_seconds = 60);

}  // namespace podscope::coordinator
