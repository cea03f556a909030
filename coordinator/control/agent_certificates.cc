#include "coordinator/control/agent_certificates.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <vector>

#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::coordinator {
namespace {

// A label for /metrics from OpenSSL's verification error (a small, fixed set).
std::string ReasonLabel(int error) {
  switch (error) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return "expired";
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return "not_yet_valid";
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      return "unknown_ca";
    case X509_V_ERR_INVALID_PURPOSE:
      return "wrong_purpose";
    default:
      return "invalid";
  }
}

// Every certificate of a PEM chain, leaf first.
std::vector<X509*> ReadChain(std::string_view pem) {
  std::vector<X509*> chain;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) chain.push_back(cert);
  BIO_free(bio);
  ERR_clear_error();  // the read that ends the loop leaves "no start line" behind
  return chain;
}

// gRPC calls this during each handshake on the agents' port (synchronously).
class Verifier final : public grpc::experimental::ExternalCertificateVerifier {
 public:
  explicit Verifier(AgentCertificates* certificates) : certificates_(certificates) {}

  bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)>, grpc::Status* sync_status) override {
    // peer_cert() is the leaf; the full chain's order is not the wire's (the CA can come first).
    const grpc::string_ref leaf = request->peer_cert();
    const grpc::string_ref chain = request->peer_cert_full_chain();
    std::string reason;
    *sync_status = certificates_->Verify(std::string_view(leaf.data(), leaf.size()),
                                         std::string_view(chain.data(), chain.size()), &reason)
                       ? grpc::Status::OK
                       : grpc::Status(grpc::StatusCode::UNAUTHENTICATED, reason);
    return true;  // answered synchronously
  }
  void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest*) override {}

 private:
  AgentCertificates* certificates_;
};

}  // namespace

AgentCertificates::AgentCertificates(std::string ca_file) : ca_file_(std::move(ca_file)) {}

AgentCertificates::~AgentCertificates() {
  absl::MutexLock lock(&mu_);
  if (store_ != nullptr) X509_STORE_free(store_);
}

absl::Status AgentCertificates::Load() {
  ASSIGN_OR_RETURN(std::string pem, common::ReadPemFile(ca_file_, "--tls-ca"));
  std::vector<X509*> roots = ReadChain(pem);
  if (roots.empty())
    return absl::InvalidArgumentError(
        common::StrCat("--tls-ca ", ca_file_, " holds no PEM certificate"));
  X509_STORE* store = X509_STORE_new();
  for (X509* root : roots) {
    X509_STORE_add_cert(store, root);
    X509_free(root);
  }
  absl::MutexLock lock(&mu_);
  if (store_ != nullptr) X509_STORE_free(store_);
  store_ = store;
  return absl::OkStatus();
}

bool AgentCertificates::Verify(std::string_view leaf_pem, std::string_view chain_pem,
                               std::string* reason) {
  // The leaf first, then the chain's other certificates (untrusted: only the CA file is trusted).
  std::vector<X509*> chain = ReadChain(leaf_pem);
  if (chain.size() > 1) {
    for (size_t i = 1; i < chain.size(); ++i) X509_free(chain[i]);
    chain.resize(1);
  }
  if (!chain.empty()) {
    for (X509* other : ReadChain(chain_pem)) {
      if (X509_cmp(other, chain[0]) == 0)
        X509_free(other);
      else
        chain.push_back(other);
    }
  }
  std::string label, name = "?";
  if (chain.empty()) {
    label = "no_certificate";
    *reason = "no client certificate";
  } else {
    char cn[256] = {0};
    if (X509_NAME_get_text_by_NID(X509_get_subject_name(chain[0]), NID_commonName, cn, sizeof(cn)) >
        0)
      name = cn;
    STACK_OF(X509)* untrusted = sk_X509_new_null();
    for (size_t i = 1; i < chain.size(); ++i) sk_X509_push(untrusted, chain[i]);
    X509_STORE_CTX* context = X509_STORE_CTX_new();
    {
      absl::MutexLock lock(&mu_);
      X509_STORE_CTX_init(context, store_, chain[0], untrusted);
      X509_STORE_CTX_set_purpose(context, X509_PURPOSE_SSL_CLIENT);
      if (X509_verify_cert(context) != 1) {
        const int error = X509_STORE_CTX_get_error(context);
        label = ReasonLabel(error);
        *reason = X509_verify_cert_error_string(error);
      }
    }
    X509_STORE_CTX_free(context);
    sk_X509_free(untrusted);
    for (X509* cert : chain) X509_free(cert);
  }
  if (label.empty()) return true;
  {
    absl::MutexLock lock(&mu_);
    ++refused_[label];
  }
  log_.Warn("grpc: refused an agent's TLS handshake (certificate CN={}): {}", name, *reason);
  return false;
}

void AgentCertificates::AppendMetrics(std::string* out) const {
  common::StrAppend(
      out,
      "# HELP podscope_grpc_refused_handshakes_total Agent TLS handshakes refused, by reason.\n",
      "# TYPE podscope_grpc_refused_handshakes_total counter\n");
  absl::MutexLock lock(&mu_);
  // Always the common reasons, so that a dashboard's query has a series before the first refusal.
  std::map<std::string, uint64_t> shown = {
      {"expired", 0}, {"unknown_ca", 0}, {"no_certificate", 0}};
  for (const auto& [reason, count] : refused_) shown[reason] = count;
  for (const auto& [reason, count] : shown) {
    common::StrAppend(out, "podscope_grpc_refused_handshakes_total{reason=\"", reason, "\"} ",
                      count, "\n");
  }
}

std::shared_ptr<grpc::ServerCredentials> AgentServerCredentials(const common::TlsFiles& files,
                                                                AgentCertificates& certificates,
                                                                unsigned refresh_seconds) {
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key, files.cert, files.ca, refresh_seconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  // Ask for (and require) a certificate; the chain is checked by the verifier, where refusals
  // are seen.
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_BUT_DONT_VERIFY);
  options.set_certificate_verifier(
      grpc::experimental::ExternalCertificateVerifier::Create<Verifier>(&certificates));
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace podscope::coordinator
