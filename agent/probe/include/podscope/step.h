/* podscope step markers: tell the profiler where each training step begins and ends.
 *
 *   #include <podscope/step.h>
 *   for (uint64_t step = 0; ; ++step) {
 *     podscope_step_begin(step);
 *     ... forward, backward, optimizer ...
 *     podscope_step_end(step);
 *   }
 *
 * Header-only C (and C++); link nothing. When libpodscope_probe.so is not loaded into the
 * process these cost a few nanoseconds: a cached null check, plus, for the first 64 calls and
 * every 1024th after, one dlopen(RTLD_NOLOAD) to notice a probe that CUDA or NCCL loaded
 * later. With the probe loaded, a step is recorded only while a capture window is open.
 * NVTX ranges named like "step 12" or "ProfilerStep#12" work too (PODSCOPE_STEP_PATTERN).
 */
#ifndef PODSCOPE_STEP_H_
#define PODSCOPE_STEP_H_

#include <dlfcn.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*podscope_step_fn)(uint64_t);

struct podscope_step_hooks {
  podscope_step_fn begin;
  podscope_step_fn end;
  uint64_t lookups;
};

static inline struct podscope_step_hooks* podscope_step_hooks_(void) {
  static struct podscope_step_hooks hooks = {0, 0, 0};
  if (hooks.begin != 0) return &hooks;
  const uint64_t n = hooks.lookups++;
  if (n >= 64 && (n & 1023) != 0) return &hooks;
  /* The probe's soname; it may have been loaded RTLD_LOCAL (by CUDA or NCCL), which dlsym on
     its own handle still reaches. */
  void* probe = dlopen("libpodscope_probe.so", RTLD_LAZY | RTLD_NOLOAD);
  if (probe == 0) return &hooks;
  podscope_step_fn end = (podscope_step_fn)dlsym(probe, "podscope_probe_step_end");
  podscope_step_fn begin = (podscope_step_fn)dlsym(probe, "podscope_probe_step_begin");
  if (begin != 0 && end != 0) {
    hooks.end = end;
    hooks.begin = begin;
  }
  dlclose(probe); /* drops only the reference NOLOAD took; the library stays */
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
