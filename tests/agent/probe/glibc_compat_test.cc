// The glibc symbols the self-contained probe supplies itself (agent/probe/glibc_compat.cc),
// checked against the real ones of this machine's glibc (2.36 on Debian 12), which the test
// reaches with dlsym: the definitions linked into this program are hidden, so dlsym finds only
// glibc's.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

extern "C" {
extern char __libc_single_threaded;
uint32_t arc4random(void);
double log2(double);
int _dl_find_object(void* pc, dl_find_object* result);
}

namespace {

int AFunctionOfThisProgram() { return 7; }

TEST(GlibcCompatTest, NeverClaimsASingleThreadedProcess) { EXPECT_EQ(__libc_single_threaded, 0); }

TEST(GlibcCompatTest, RandomWordsAreNotRepeated) {
  std::set<uint32_t> seen;
  for (int i = 0; i < 64; ++i) seen.insert(arc4random());
  EXPECT_GE(seen.size(), 63u) << "64 draws of 32 bits";
}

TEST(GlibcCompatTest, Log2IsTheOldVersionsWithTheSameValues) {
  EXPECT_EQ(log2(8.0), 3.0);
  EXPECT_EQ(log2(0.5), -1.0);
  EXPECT_EQ(log2(1.0), 0.0);
  auto* real = reinterpret_cast<double (*)(double)>(dlsym(RTLD_DEFAULT, "log2"));
  ASSERT_NE(real, nullptr);
  for (double x : {3.0, 1e-300, 1e300, 12345.678}) EXPECT_EQ(log2(x), real(x)) << x;
}

// Where the unwinder looks for an exception's frame tables: the same object, pages and
// PT_GNU_EH_FRAME as glibc's own answer, for code in this program, in libc and in libstdc++.
TEST(GlibcCompatTest, FindsTheSameObjectAndFrameTablesAsGlibc) {
  using FindObject = int (*)(void*, dl_find_object*);
  auto* real = reinterpret_cast<FindObject>(dlsym(RTLD_DEFAULT, "_dl_find_object"));
  ASSERT_NE(real, nullptr) << "this machine's glibc is older than 2.35";
  void* in_libc = dlsym(RTLD_DEFAULT, "getpid");
  void* in_libstdcxx = dlsym(RTLD_DEFAULT, "_ZNSt6chrono3_V212steady_clock3nowEv");
  ASSERT_NE(in_libc, nullptr);
  ASSERT_NE(in_libstdcxx, nullptr);
  for (void* pc : {reinterpret_cast<void*>(&AFunctionOfThisProgram), in_libc, in_libstdcxx}) {
    dl_find_object want{}, got{};
    ASSERT_EQ(real(pc, &want), 0);
    ASSERT_EQ(_dl_find_object(pc, &got), 0) << pc;
    EXPECT_EQ(got.dlfo_map_start, want.dlfo_map_start) << pc;
    EXPECT_EQ(got.dlfo_map_end, want.dlfo_map_end) << pc;
    EXPECT_EQ(got.dlfo_eh_frame, want.dlfo_eh_frame) << pc;
    EXPECT_NE(got.dlfo_eh_frame, nullptr) << pc;
  }
  dl_find_object none{};
  EXPECT_EQ(real(reinterpret_cast<void*>(16), &none), -1);
  EXPECT_EQ(_dl_find_object(reinterpret_cast<void*>(16), &none), -1);
}

}  // namespace
