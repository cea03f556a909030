// Keeping freed memory for reuse. glibc's malloc serves blocks above a threshold from fresh
// mappings and gives them back to the kernel when freed, so every analysis of a worker takes its
// tables (tens of megabytes at a real rank's density) as new, zeroed pages: on a VM a page fault
// costs microseconds, more than the analysis's own work on those pages (the summary of eight
// dense workers took 4.9 s that way and 2.3 s with the heap kept).
#pragma once

#include <cstddef>

namespace podscope::common {

// Serves blocks up to 32 MiB (glibc's most) from the heap, and keeps up to `keep_bytes` of freed
// heap for reuse before giving memory back. Call once, before the work starts.
void KeepFreedHeapForReuse(size_t keep_bytes);

// Gives every thread's freed heap back to the kernel now: for the end of work done on other
// threads, whose arenas the work that follows on this one would not reuse.
void ReturnFreedHeap();

}  // namespace podscope::common
