// Bearer tokens for the REST API (docs/security.md), kept hashed: the coordinator's token file
// holds one line per token, "NAME ROLE sha256$SALT$HASH", where HASH is SHA-256 over the salt's
// bytes followed by the token's. Nobody who reads the file (or a backup of it) learns a token.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "http/http_types.h"

namespace podscope::coordinator {

// Tokens shorter than this are refused by hash-token: a bearer token must not be guessable.
inline constexpr size_t kMinTokenBytes = 16;
inline constexpr size_t kMaxTokenBytes = 4096;
inline constexpr size_t kMaxTokenNameBytes = 64;
inline constexpr size_t kMaxTokens = 10'000;
inline constexpr size_t kMaxTokenFileBytes = 4 << 20;

struct TokenIdentity {
  std::string name;  // who the token belongs to, for logs (never the token)
  http::Access role = http::Access::kRead;
};

// "read", "capture", "admin" -> the role; an error naming the choices otherwise.
absl::StatusOr<http::Access> ParseRole(std::string_view text);

// The file line for `token` under `name` with `role`, with a fresh random salt.
absl::StatusOr<std::string> HashTokenLine(std::string_view name, http::Access role,
                                          std::string_view token);

// Immutable once loaded; shared by the I/O threads.
class TokenStore {
 public:
  // Parses a token file's text. Errors name the line: "line 3: role \"root\" is not one of ...".
  static absl::StatusOr<TokenStore> Parse(std::string_view text);
  // Reads a token file: a regular file of at least one token line.
  static absl::StatusOr<TokenStore> Load(const std::string& path);

  // The identity whose token this is, or nullopt. Every entry is hashed and compared in constant
  // time, whichever matches, so the answer's timing says nothing about the token.
  std::optional<TokenIdentity> Find(std::string_view token) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    TokenIdentity identity;
    std::string salt;    // raw bytes
    std::string digest;  // raw SHA-256
  };
  std::vector<Entry> entries_;
};

}  // namespace podscope::coordinator
