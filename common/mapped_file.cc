#include "common/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>

#include "common/file_io.h"
#include "common/str_util.h"

namespace podscope::common {
namespace {

// One open mapping, as the SIGBUS handler sees it. Plain atomics in static storage: the handler
// may run on any thread at any time, and takes no lock.
struct Slot {
  std::atomic<bool> taken{false};
  std::atomic<uintptr_t> begin{0};  // 0 while not yet (or no longer) registered
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> damaged{false};
};

Slot slots[MappedFile::kMaxOpen];
std::atomic<uintptr_t> page_size{4096};
struct sigaction previous_sigbus;  // written once, before the handler is installed
std::once_flag install_once;
bool installed = false;  // written once, under install_once

void OnSigbus(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& slot : slots) {
    const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    if (begin == 0 || address < begin || address >= slot.end.load(std::memory_order_acquire)) {
      continue;
    }
    // The file lost this page: zeros in its place, and the read is retried over them.
    const uintptr_t page = address & ~(page_size.load(std::memory_order_relaxed) - 1);
    if (mmap(reinterpret_cast<void*>(page), page_size.load(std::memory_order_relaxed), PROT_READ,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
      slot.damaged.store(true, std::memory_order_release);
      return;
    }
    break;  // cannot patch it: as any other SIGBUS
  }
  if ((previous_sigbus.sa_flags & SA_SIGINFO) != 0 && previous_sigbus.sa_sigaction != nullptr) {
    previous_sigbus.sa_sigaction(signal, info, context);
    return;
  }
  if (previous_sigbus.sa_handler != SIG_DFL && previous_sigbus.sa_handler != SIG_IGN) {
    previous_sigbus.sa_handler(signal);
    return;
  }
  // What SIGBUS always did: end the process (the signal stays blocked until this returns).
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(signal, &fallback, nullptr);
  raise(signal);
}

bool InstallHandler() {
  std::call_once(install_once, [] {
    const long size = sysconf(_SC_PAGESIZE);
    if (size > 0) page_size.store(static_cast<uintptr_t>(size), std::memory_order_relaxed);
    struct sigaction action {};
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    installed = sigaction(SIGBUS, &action, &previous_sigbus) == 0;
  });
  return installed;
}

int TakeSlot() {
  for (int i = 0; i < MappedFile::kMaxOpen; ++i) {
    bool expected = false;
    if (slots[i].taken.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      return i;
    }
  }
  return -1;
}

void FreeSlot(int i) {
  slots[i].begin.store(0, std::memory_order_release);
  slots[i].end.store(0, std::memory_order_release);
  slots[i].damaged.store(false, std::memory_order_release);
  slots[i].taken.store(false, std::memory_order_release);
}

}  // namespace

absl::StatusOr<MappedFile> MappedFile::Map(const std::string& path, uint64_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_size <= 0) {
    close(fd);
    return absl::FailedPreconditionError(StrCat(path, ": not a non-empty regular file"));
  }
  const auto size = static_cast<uint64_t>(info.st_size);
  if (size > max_bytes) {
    close(fd);
    return absl::ResourceExhaustedError(
        StrCat(path, ": ", size, " bytes exceeds the limit of ", max_bytes, " bytes"));
  }
  const int slot = InstallHandler() ? TakeSlot() : -1;
  if (slot < 0) {
    close(fd);
    return absl::FailedPreconditionError("no mapping slot free");
  }
  const uintptr_t page = page_size.load(std::memory_order_relaxed);
  const size_t reserved = static_cast<size_t>((size + kReadPadding + page - 1) & ~(page - 1));
  // Zero pages reserved for the whole span first, then the file over their start: the padding,
  // and the rest of the file's last page, read as zeros.
  void* base =
      mmap(nullptr, reserved, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base != MAP_FAILED && mmap(base, static_cast<size_t>(size), PROT_READ,
                                 MAP_PRIVATE | MAP_FIXED | MAP_POPULATE, fd, 0) == MAP_FAILED) {
    munmap(base, reserved);
    base = MAP_FAILED;
  }
  close(fd);
  if (base == MAP_FAILED) {
    FreeSlot(slot);
    return absl::FailedPreconditionError(StrCat(path, ": cannot map: ", std::strerror(errno)));
  }
  const auto begin = reinterpret_cast<uintptr_t>(base);
  slots[slot].end.store(begin + reserved, std::memory_order_release);
  slots[slot].begin.store(begin, std::memory_order_release);
  MappedFile mapped;
  mapped.data_ = static_cast<const char*>(base);
  mapped.size_ = static_cast<size_t>(size);
  mapped.reserved_ = reserved;
  mapped.slot_ = slot;
  return mapped;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      reserved_(std::exchange(other.reserved_, 0)),
      slot_(std::exchange(other.slot_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    reserved_ = std::exchange(other.reserved_, 0);
    slot_ = std::exchange(other.slot_, -1);
  }
  return *this;
}

MappedFile::~MappedFile() { Release(); }

void MappedFile::Release() {
  if (slot_ < 0) return;
  // Unregistered before unmapped: a later SIGBUS at these addresses is someone else's.
  slots[slot_].begin.store(0, std::memory_order_release);
  munmap(const_cast<char*>(data_), reserved_);
  FreeSlot(slot_);
  slot_ = -1;
  data_ = nullptr;
}

bool MappedFile::damaged() const {
  return slot_ >= 0 && slots[slot_].damaged.load(std::memory_order_acquire);
}

}  // namespace podscope::common
