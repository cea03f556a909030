/* podscope step markers: tell the profiler where each training step begins and ends.
 *
 *   #include <podscope/step.h>
 *   for (uint64_t step = 0; ; ++step) {
 *     podscope_step_begin(step);
 *     ... forward, backward, optimizer ...
 *     podscope_step_end(step);
 *   }
 *
 * Header-only C (and C++); link nothing. Without libpodscope_probe.so in the process a mark
 * costs a cached null check and a read of the seconds clock (nanoseconds): the header looks for
 * the probe at the first mark, then at most once a second for a minute and once a minute after
 * (CUDA and NCCL load it lazily, possibly after the first steps). It looks where CUDA and NCCL
 * load it from (CUDA_INJECTION64_PATH, NCCL_PROFILER_PLUGIN) and in the global scope (LD_PRELOAD).
 * With the probe loaded, a step is recorded only while a capture window is open.
 * NVTX ranges named like "step 12" or "ProfilerStep#12" work too (PODSCOPE_STEP_PATTERN).
 */
#ifndef PODSCOPE_STEP_H_
#define PODSCOPE_STEP_H_

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* A glibc extension that plain C (-std=c11) hides without _GNU_SOURCE. */
#ifndef RTLD_DEFAULT
#define RTLD_DEFAULT ((void*)0)
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*podscope_step_fn)(uint64_t);

struct podscope_step_hooks {
  podscope_step_fn begin;
  podscope_step_fn end;
  int64_t first_look_s; /* -1: never looked */
  int64_t next_look_s;
};

static inline int podscope_step_find_(void* handle, struct podscope_step_hooks* hooks) {
  podscope_step_fn begin = 0, end = 0;
  /* POSIX's way to turn dlsym's void* into a function pointer without ISO C's complaint. */
  *(void**)(&begin) = dlsym(handle, "podscope_probe_step_begin");
  *(void**)(&end) = dlsym(handle, "podscope_probe_step_end");
  if (begin == 0 || end == 0) return 0;
  hooks->end = end;
  hooks->begin = begin;
  return 1;
}

static inline struct podscope_step_hooks* podscope_step_hooks_(void) {
  static struct podscope_step_hooks hooks = {0, 0, -1, 0};
  if (hooks.begin != 0) return &hooks;
  const int64_t now = (int64_t)time(0); /* a vDSO read on Linux: a few nanoseconds */
  if (hooks.first_look_s >= 0 && now < hooks.next_look_s) return &hooks;
  if (hooks.first_look_s < 0) hooks.first_look_s = now;
  hooks.next_look_s = now + (now - hooks.first_look_s < 60 ? 1 : 60);
  if (podscope_step_find_(RTLD_DEFAULT, &hooks)) return &hooks; /* LD_PRELOAD, or linked */
  const char* paths[2] = {getenv("CUDA_INJECTION64_PATH"), getenv("NCCL_PROFILER_PLUGIN")};
  for (int i = 0; i < 2; ++i) {
    if (paths[i] == 0 || paths[i][0] == 0) continue;
    /* RTLD_NOLOAD: only a library already loaded (even RTLD_LOCAL, as CUDA and NCCL load it). */
    void* probe = dlopen(paths[i], RTLD_LAZY | RTLD_NOLOAD);
    if (probe == 0) continue;
    const int found = podscope_step_find_(probe, &hooks);
    dlclose(probe); /* drops only the reference NOLOAD took; the library stays */
    if (found) break;
  }
  return &hooks;
}

/* Marks the start of step `step` on the calling thread. */
static inline void podscope_step_begin(uint64_t step) {
  struct podscope_step_hooks* h = podscope_step_hooks_();
  if (h->begin != 0) h->begin(step);
}

/* Marks the end of step `step` on the calling thread (the same thread that began it). */
static inline void podscope_step_end(uint64_t step) {
  struct podscope_step_hooks* h = podscope_step_hooks_();
  if (h->end != 0) h->end(step);
}

#ifdef __cplusplus
}
#endif

#endif /* PODSCOPE_STEP_H_ */
