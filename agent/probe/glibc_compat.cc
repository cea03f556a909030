// What the self-contained probe needs of glibc beyond its baseline (2.28: RHEL 8,
// manylinux_2_28), supplied inside the probe. It is linked against an older glibc's libraries
// (scripts/build_env.sh makes that build root), but the C++ runtime and libgcc it carries were
// built on Debian 12 against glibc 2.36 and reach for a few newer symbols; so do some of our
// dependencies through their headers. Each definition here is hidden: it serves the probe's own
// code only and never replaces the process's glibc. tests/agent/probe/check_portable.sh fails on
// any glibc version above the baseline, so a new one cannot slip in unnoticed.
//
// Compiled into libpodscope_probe.so only, never into programs (which have the real ones).
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#define PODSCOPE_HIDDEN __attribute__((visibility("hidden")))

// The names are glibc's, not ours to style.
// NOLINTBEGIN(readability-identifier-naming)
extern "C" {

// glibc 2.32. libstdc++ skips its atomic reference counts while this says the process has one
// thread; never claiming so is always correct, only slightly slower.
PODSCOPE_HIDDEN char __libc_single_threaded = 0;

// glibc 2.36. std::random_device's default source in GCC 12's libstdc++. getrandom (glibc 2.25)
// blocks only until the kernel's pool is first seeded, at boot; where the kernel or a seccomp
// profile has no getrandom (ENOSYS), /dev/urandom, as glibc's own does.
static bool PodscopeReadUrandom(char* out, size_t size) {
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t got = 0;
  while (got < size) {
    const ssize_t n = read(fd, out + got, size - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fd);
  return got == size;
}

PODSCOPE_HIDDEN uint32_t arc4random(void) {
  uint32_t value = 0;
  char* out = reinterpret_cast<char*>(&value);
  size_t got = 0;
  while (got < sizeof(value)) {
    const ssize_t n = getrandom(out + got, sizeof(value) - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno == ENOSYS) {
      if (!PodscopeReadUrandom(out, sizeof(value))) abort();
      return value;
    } else if (n < 0 && errno != EINTR) {
      abort();  // as glibc's own arc4random does when the kernel has no randomness to give
    }
  }
  return value;
}

// glibc 2.29 gave log2 a new version (errno handled without the SVID wrapper); the 2.2.5 one
// computes the same values.
double podscope_log2_glibc_2_2_5(double x);
__asm__(".symver podscope_log2_glibc_2_2_5, log2@GLIBC_2.2.5");
PODSCOPE_HIDDEN double log2(double x) { return podscope_log2_glibc_2_2_5(x); }

// glibc 2.35. GCC 12's unwinder finds an exception's frame tables through this and, where glibc
// has it, looks nowhere else; dl_iterate_phdr (glibc 2.2.4) tells the same: the loaded object
// whose segments hold `pc`, and where its PT_GNU_EH_FRAME is.
struct PodscopeFindObject {
  const void* pc;
  dl_find_object* result;
  bool found;
};

static int PodscopeVisitObject(dl_phdr_info* info, size_t, void* data) {
  auto* find = static_cast<PodscopeFindObject*>(data);
  const auto pc = reinterpret_cast<uintptr_t>(find->pc);
  uintptr_t start = UINTPTR_MAX, end = 0, eh_frame = 0;
  bool holds_pc = false;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    const uintptr_t begin = info->dlpi_addr + segment.p_vaddr;
    if (segment.p_type == PT_LOAD) {
      if (begin < start) start = begin;
      if (begin + segment.p_memsz > end) end = begin + segment.p_memsz;
      if (pc >= begin && pc < begin + segment.p_memsz) holds_pc = true;
    } else if (segment.p_type == PT_GNU_EH_FRAME) {
      eh_frame = begin;
    }
  }
  if (!holds_pc) return 0;
  // As glibc reports them: from the first mapped page to the end of the last segment.
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  find->result->dlfo_flags = 0;
  find->result->dlfo_map_start = reinterpret_cast<void*>(start & ~(page - 1));
  find->result->dlfo_map_end = reinterpret_cast<void*>(end);
  find->result->dlfo_link_map = nullptr;
  find->result->dlfo_eh_frame = reinterpret_cast<void*>(eh_frame);
  find->found = true;
  return 1;
}

PODSCOPE_HIDDEN int _dl_find_object(void* pc, dl_find_object* result) {
  PodscopeFindObject find{pc, result, false};
  dl_iterate_phdr(PodscopeVisitObject, &find);
  return find.found ? 0 : -1;
}

}  // extern "C"
// NOLINTEND(readability-identifier-naming)
