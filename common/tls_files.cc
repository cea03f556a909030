#include "common/tls_files.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "common/file_io.h"
#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::common {
namespace {

constexpr uint64_t kMaxPemBytes = 1 << 20;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::unique_ptr<BIO, BioFree> MemoryBio(std::string_view pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

}  // namespace

absl::StatusOr<std::string> ReadPemFile(const std::string& path, std::string_view flag) {
  absl::StatusOr<std::string> text = ReadFileMaybeGzip(path, {.max_file_bytes = kMaxPemBytes});
  if (!text.ok()) return absl::InvalidArgumentError(StrCat(flag, ": ", text.status().message()));
  return text;
}

absl::Status CheckTlsChoice(const TlsFiles& files, bool insecure, std::string_view daemon) {
  if (insecure) {
    if (files.any()) {
      return absl::InvalidArgumentError(
          "--insecure and --tls-cert/--tls-key/--tls-ca exclude each other: choose one");
    }
    return absl::OkStatus();
  }
  if (files.cert.empty() || files.key.empty() || files.ca.empty()) {
    return absl::InvalidArgumentError(
        StrCat(daemon,
               " needs --tls-cert, --tls-key and --tls-ca (scripts/dev-certs.sh makes development "
               "ones), or "
               "--insecure for plaintext on a network you trust; missing: ",
               files.cert.empty() ? "--tls-cert " : "", files.key.empty() ? "--tls-key " : "",
               files.ca.empty() ? "--tls-ca" : ""));
  }
  ASSIGN_OR_RETURN(std::string cert, ReadPemFile(files.cert, "--tls-cert"));
  auto cert_bio = MemoryBio(cert);
  std::unique_ptr<X509, X509Free> leaf(
      PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (leaf == nullptr)
    return absl::InvalidArgumentError(
        StrCat("--tls-cert ", files.cert, " holds no PEM certificate"));
  ASSIGN_OR_RETURN(std::string key, ReadPemFile(files.key, "--tls-key"));
  auto key_bio = MemoryBio(key);
  std::unique_ptr<EVP_PKEY, KeyFree> private_key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (private_key == nullptr)
    return absl::InvalidArgumentError(StrCat("--tls-key ", files.key, " holds no PEM private key"));
  if (X509_check_private_key(leaf.get(), private_key.get()) != 1) {
    return absl::InvalidArgumentError(
        StrCat("--tls-key ", files.key, " is not the key of the certificate in ", files.cert));
  }
  ASSIGN_OR_RETURN(std::string ca, ReadPemFile(files.ca, "--tls-ca"));
  auto ca_bio = MemoryBio(ca);
  std::unique_ptr<X509, X509Free> root(PEM_read_bio_X509(ca_bio.get(), nullptr, nullptr, nullptr));
  if (root == nullptr)
    return absl::InvalidArgumentError(StrCat("--tls-ca ", files.ca, " holds no PEM certificate"));
  return absl::OkStatus();
}

absl::StatusOr<std::string> CertificateCommonName(std::string_view pem) {
  auto bio = MemoryBio(pem);
  std::unique_ptr<X509, X509Free> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) return absl::InvalidArgumentError("not a PEM certificate");
  char name[256] = {0};
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, name,
                                          sizeof(name));
  if (n <= 0)
    return absl::InvalidArgumentError("the certificate's subject has no common name (CN)");
  return std::string(name, static_cast<size_t>(n));
}

}  // namespace podscope::common
