// The TLS files both daemons take (--tls-cert, --tls-key, --tls-ca) and the choice between
// them and --insecure (docs/security.md): one rule, one set of error messages, for both.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace podscope::common {

struct TlsFiles {
  std::string cert;  // this daemon's certificate chain, PEM
  std::string key;   // its private key, PEM
  std::string ca;    // the CA the peers' certificates must chain to, PEM
  bool any() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

// TLS needs all three files, each readable and holding what its flag says; --insecure needs
// none of them (and refuses them, so that nobody believes a link is encrypted when it is not).
// Errors name the flag and the file.
absl::Status CheckTlsChoice(const TlsFiles& files, bool insecure, std::string_view daemon);

// A PEM file's whole text, bounded (certificate bundles are small).
absl::StatusOr<std::string> ReadPemFile(const std::string& path, std::string_view flag);

// The identity a certificate states: its subject's common name.
absl::StatusOr<std::string> CertificateCommonName(std::string_view pem);

}  // namespace podscope::common
