#include "coordinator/auth/token_store.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <filesystem>

#include "common/file_io.h"
#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::coordinator {
namespace {

constexpr std::string_view kScheme = "sha256";
constexpr size_t kSaltBytes = 16;
constexpr size_t kDigestBytes = 32;

std::string Sha256(std::string_view salt, std::string_view token) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_MD_CTX* context = EVP_MD_CTX_new();
  EVP_DigestInit_ex(context, EVP_sha256(), nullptr);
  EVP_DigestUpdate(context, salt.data(), salt.size());
  EVP_DigestUpdate(context, token.data(), token.size());
  EVP_DigestFinal_ex(context, digest, &size);
  EVP_MD_CTX_free(context);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

std::string Hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const unsigned char c : bytes) out += {kHex[c >> 4], kHex[c & 15]};
  return out;
}

bool Unhex(std::string_view hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int high = nibble(hex[i]), low = nibble(hex[i + 1]);
    if (high < 0 || low < 0) return false;
    out->push_back(static_cast<char>(high * 16 + low));
  }
  return true;
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxTokenNameBytes) return false;
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' &&
        c != '@')
      return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<http::Access> ParseRole(std::string_view text) {
  if (text == "read") return http::Access::kRead;
  if (text == "capture") return http::Access::kCapture;
  if (text == "admin") return http::Access::kAdmin;
  return absl::InvalidArgumentError(
      common::StrCat("role \"", text, "\" is not one of read, capture, admin"));
}

absl::StatusOr<std::string> HashTokenLine(std::string_view name, http::Access role,
                                          std::string_view token) {
  if (!ValidName(name)) {
    return absl::InvalidArgumentError(common::StrCat("a token's name is 1-", kMaxTokenNameBytes,
                                                     " letters, digits or -_.@; got \"", name,
                                                     "\""));
  }
  if (role == http::Access::kOpen)
    return absl::InvalidArgumentError("a token's role is read, capture or admin");
  if (token.size() < kMinTokenBytes || token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(
        common::StrCat("a token is ", kMinTokenBytes, "-", kMaxTokenBytes,
                       " bytes (make one with: openssl rand -hex 32); got ", token.size()));
  }
  for (const char c : token) {
    if (c <= 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(
          "a token is printable ASCII without spaces (it travels in an HTTP header)");
    }
  }
  unsigned char salt[kSaltBytes];
  if (RAND_bytes(salt, sizeof(salt)) != 1)
    return absl::InternalError("no random bytes for the salt");
  const std::string salt_bytes(reinterpret_cast<const char*>(salt), sizeof(salt));
  return common::StrCat(name, " ", http::AccessName(role), " ", kScheme, "$", Hex(salt_bytes), "$",
                        Hex(Sha256(salt_bytes, token)));
}

absl::StatusOr<TokenStore> TokenStore::Parse(std::string_view text) {
  TokenStore store;
  int line_number = 0;
  for (std::string_view line : common::Split(text, '\n')) {
    ++line_number;
    line = common::StripWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    auto fail = [line_number](std::string_view why) {
      return absl::InvalidArgumentError(common::StrCat("line ", line_number, ": ", why));
    };
    std::vector<std::string_view> fields;
    for (std::string_view f : common::Split(line, ' ')) {
      if (!f.empty()) fields.push_back(f);
    }
    if (fields.size() != 3)
      return fail("expected NAME ROLE sha256$SALT$HASH (from podscope-coordinator hash-token)");
    if (!ValidName(fields[0]))
      return fail(common::StrCat("bad name \"", fields[0].substr(0, 80), "\""));
    absl::StatusOr<http::Access> role = ParseRole(fields[1]);
    if (!role.ok()) return fail(std::string(role.status().message()));
    const std::vector<std::string_view> hash = common::Split(fields[2], '$');
    Entry entry{.identity = {std::string(fields[0]), *role}};
    if (hash.size() != 3 || hash[0] != kScheme || !Unhex(hash[1], &entry.salt) ||
        entry.salt.empty() || !Unhex(hash[2], &entry.digest) ||
        entry.digest.size() != kDigestBytes) {
      return fail(
          "the hash is not sha256$SALT$HASH in hex (a token itself must never be in this file)");
    }
    for (const Entry& other : store.entries_) {
      if (other.identity.name == entry.identity.name) {
        return fail(common::StrCat("the name \"", entry.identity.name, "\" is used twice"));
      }
    }
    if (store.entries_.size() >= kMaxTokens)
      return fail(common::StrCat("more than ", kMaxTokens, " tokens"));
    store.entries_.push_back(std::move(entry));
  }
  return store;
}

absl::StatusOr<TokenStore> TokenStore::Load(const std::string& path) {
  // A pipe or device would block or read as empty; a file of no tokens would lock every caller
  // out, and on a reload a file caught empty mid-rewrite would too (the old tokens stay then).
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return absl::InvalidArgumentError(common::StrCat(path, ": not a regular file"));
  ASSIGN_OR_RETURN(std::string text,
                   common::ReadFileMaybeGzip(path, {.max_file_bytes = kMaxTokenFileBytes}));
  absl::StatusOr<TokenStore> store = Parse(text);
  if (!store.ok())
    return absl::InvalidArgumentError(common::StrCat(path, ": ", store.status().message()));
  if (store->size() == 0) {
    return absl::InvalidArgumentError(common::StrCat(
        path, ": holds no token (add a line with `podscope-coordinator hash-token`)"));
  }
  return store;
}

std::optional<TokenIdentity> TokenStore::Find(std::string_view token) const {
  const Entry* found = nullptr;
  for (const Entry& entry : entries_) {
    const std::string digest = Sha256(entry.salt, token);
    // Every entry is hashed and compared whole; the match is picked without branching on bytes.
    const bool match = CRYPTO_memcmp(digest.data(), entry.digest.data(), kDigestBytes) == 0;
    if (match && found == nullptr) found = &entry;
  }
  if (found == nullptr) return std::nullopt;
  return found->identity;
}

}  // namespace podscope::coordinator
