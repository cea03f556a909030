#include "common/heap_reuse.h"

#include <algorithm>
#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace podscope::common {

void KeepFreedHeapForReuse(size_t keep_bytes) {
#if defined(__GLIBC__)
  // Setting either fixes both thresholds (glibc stops adjusting them itself).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(std::min<size_t>(keep_bytes, INT_MAX)));
#else
  (void)keep_bytes;
#endif
}

void ReturnFreedHeap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace podscope::common
