// Token files: what hash-token writes is what the store accepts, tokens are never stored, and a
// broken file says which line and why.
#include "coordinator/auth/token_store.h"

#include <gtest/gtest.h>

#include "coordinator/auth/token_authorizer.h"
#include "tests/test_paths.h"

namespace podscope::coordinator {
namespace {

constexpr char kReadToken[] = "read-token-0123456789";
constexpr char kAdminToken[] = "admin-token-0123456789";

std::string Line(std::string_view name, http::Access role, std::string_view token) {
  absl::StatusOr<std::string> line = HashTokenLine(name, role, token);
  EXPECT_TRUE(line.ok()) << line.status();
  return line.value_or("");
}

TEST(TokenStoreTest, HashTokenLinesAreFoundByTheirTokenOnly) {
  const std::string read = Line("alice", http::Access::kRead, kReadToken);
  const std::string admin = Line("root", http::Access::kAdmin, kAdminToken);
  EXPECT_EQ(read.find(kReadToken), std::string::npos) << "the token itself is in its line";
  EXPECT_TRUE(read.starts_with("alice read sha256$")) << read;
  absl::StatusOr<TokenStore> store =
      TokenStore::Parse("# comment\n\n" + read + "\n" + admin + "\n");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(store->size(), 2u);
  ASSERT_TRUE(store->Find(kReadToken).has_value());
  EXPECT_EQ(store->Find(kReadToken)->name, "alice");
  EXPECT_EQ(store->Find(kReadToken)->role, http::Access::kRead);
  EXPECT_EQ(store->Find(kAdminToken)->role, http::Access::kAdmin);
  EXPECT_FALSE(store->Find("read-token-012345678").has_value());  // one byte short
  EXPECT_FALSE(store->Find("").has_value());
  // The same token hashed twice gives two lines (a fresh salt each time).
  EXPECT_NE(Line("alice", http::Access::kRead, kReadToken), read);
}

TEST(TokenStoreTest, HashTokenRefusesWeakTokensAndBadNames) {
  EXPECT_FALSE(HashTokenLine("alice", http::Access::kRead, "short").ok());
  EXPECT_FALSE(HashTokenLine("alice", http::Access::kRead, "has a space in it, 0123456789").ok());
  EXPECT_FALSE(HashTokenLine("al ice", http::Access::kRead, kReadToken).ok());
  EXPECT_FALSE(HashTokenLine("", http::Access::kRead, kReadToken).ok());
  EXPECT_FALSE(HashTokenLine("alice", http::Access::kOpen, kReadToken).ok());
  EXPECT_EQ(ParseRole("capture").value(), http::Access::kCapture);
  EXPECT_EQ(ParseRole("root").status().message(),
            "role \"root\" is not one of read, capture, admin");
}

// A file that would lock every caller out, or block the daemon, is refused (on a reload the
// old tokens stay).
TEST(TokenStoreTest, AnEmptyFileOrOneThatIsNoFileIsRefused) {
  testing::ScratchDir dir;
  const std::string empty = dir.Write("empty", "");
  const absl::Status none = TokenStore::Load(empty).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.message().find("holds no token"), std::string_view::npos) << none;
  EXPECT_FALSE(TokenStore::Load(dir.Write("blank", "\n\n")).ok());
  for (const std::string& not_a_file : {std::string("/dev/null"), dir.path()}) {
    const absl::Status s = TokenStore::Load(not_a_file).status();
    EXPECT_NE(s.message().find("not a regular file"), std::string_view::npos) << s;
  }
  absl::StatusOr<TokenStore> one =
      TokenStore::Load(dir.Write("one", Line("alice", http::Access::kRead, kReadToken) + "\n"));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->size(), 1u);
}

TEST(TokenStoreTest, ABrokenFileNamesTheLine) {
  const std::string good = Line("alice", http::Access::kRead, kReadToken);
  auto error = [](const std::string& text) {
    return std::string(TokenStore::Parse(text).status().message());
  };
  EXPECT_EQ(error(good + "\nbob root sha256$00$00\n"),
            "line 2: role \"root\" is not one of read, capture, admin");
  EXPECT_EQ(error("\n" + good + "\n" + good + "\n"), "line 3: the name \"alice\" is used twice");
  EXPECT_EQ(error("bob read " + std::string(kReadToken) + "\n"),
            "line 1: the hash is not sha256$SALT$HASH in hex (a token itself must never be in this "
            "file)");
  EXPECT_EQ(error("bob read\n"),
            "line 1: expected NAME ROLE sha256$SALT$HASH (from podscope-coordinator hash-token)");
  EXPECT_EQ(error("bob read sha256$zz$00\n"),
            "line 1: the hash is not sha256$SALT$HASH in hex (a token itself must never be in this "
            "file)");
}

TEST(TokenAuthorizerTest, AnswersEachCaseWithItsStatusAndCountsIt) {
  absl::StatusOr<TokenStore> store =
      TokenStore::Parse(Line("alice", http::Access::kRead, kReadToken) + "\n" +
                        Line("root", http::Access::kAdmin, kAdminToken));
  ASSERT_TRUE(store.ok());
  TokenAuthorizer authorizer(std::move(*store));
  http::HttpRequest request{.method = "DELETE", .path = "/v1/captures/x"};
  EXPECT_FALSE(authorizer.Check(request, http::Access::kOpen).has_value());
  std::optional<http::HttpResponse> refusal = authorizer.Check(request, http::Access::kAdmin);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->status, 401);
  EXPECT_EQ(refusal->content_type, "application/problem+json");
  request.headers["authorization"] = std::string("Bearer ") + kReadToken;
  refusal = authorizer.Check(request, http::Access::kAdmin);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->status, 403);
  EXPECT_EQ(refusal->body.find(kReadToken), std::string::npos);
  EXPECT_FALSE(authorizer.Check(request, http::Access::kRead).has_value());
  request.headers["authorization"] =
      std::string("bearer ") + kAdminToken;  // the scheme is case-insensitive
  EXPECT_FALSE(authorizer.Check(request, http::Access::kAdmin).has_value());
  request.headers["authorization"] = std::string("Basic ") + kAdminToken;
  EXPECT_EQ(authorizer.Check(request, http::Access::kRead)->status, 401);
  request.headers["authorization"] = "Bearer nobody-holds-this-token";
  EXPECT_EQ(authorizer.Check(request, http::Access::kRead)->status, 401);
  std::string metrics;
  authorizer.AppendMetrics(&metrics);
  EXPECT_NE(metrics.find("podscope_auth_failures_total{reason=\"missing_token\"} 1\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("podscope_auth_failures_total{reason=\"invalid_token\"} 2\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("podscope_auth_failures_total{reason=\"forbidden\"} 1\n"),
            std::string::npos)
      << metrics;
  // A new file replaces the old tokens at once.
  authorizer.Replace(
      *TokenStore::Parse(Line("carol", http::Access::kCapture, "carol-token-0123456789")));
  request.headers["authorization"] = std::string("Bearer ") + kAdminToken;
  EXPECT_EQ(authorizer.Check(request, http::Access::kRead)->status, 401);
}

}  // namespace
}  // namespace podscope::coordinator
