#include "common/cancellation.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace podscope::common {

Cancellation::Cancellation() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

Cancellation::~Cancellation() {
  if (fd_ >= 0) close(fd_);
}

void Cancellation::Cancel() {
  if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
  if (fd_ >= 0) {
    const uint64_t one = 1;
    // The counter cannot overflow from one write; a failure leaves cancelled() to say it.
    [[maybe_unused]] const ssize_t written = write(fd_, &one, sizeof(one));
  }
}

}  // namespace podscope::common
