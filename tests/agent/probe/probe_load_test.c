/* Loads libpodscope_probe.so the way CUDA and NCCL do (dlopen, RTLD_LOCAL), with no agent
 * anywhere, and checks that nothing breaks: the step API is a no-op before the probe is there
 * and finds it after, NCCL's v5 table initialises a communicator with nothing switched on, and
 * CUDA's injection entry point succeeds even where CUPTI cannot load. Exit 0 on success. */
#define _POSIX_C_SOURCE 200809L /* setenv, nanosleep in strict C */
#include <dlfcn.h>
#include <podscope/step.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  const char* name;
  int (*init)(void** context, uint64_t comm_id, int* mask, const char* name, int nodes, int nranks,
              int rank, void* logger);
  void* start_event;
  void* stop_event;
  void* record_event_state;
  int (*finalize)(void* context);
} profiler_v5;

static int fail(const char* what) {
  fprintf(stderr, "FAIL: %s\n", what);
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) return fail("usage: probe_load_test LIBRARY");
  podscope_step_begin(1);
  podscope_step_end(1);
  if (podscope_step_hooks_()->begin != 0) return fail("step hooks resolved with no probe loaded");

  setenv("PODSCOPE_AGENT_SOCKET", "/nonexistent-podscope-dir/agent.sock", 1);
  setenv("PODSCOPE_PROBE_RECONNECT_MS", "10", 1);
  setenv("CUDA_INJECTION64_PATH", argv[1], 1); /* where CUDA, and the step API, find it */
  void* probe = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (probe == NULL) return fail(dlerror());

  int (*inject)(void) = 0;
  *(void**)(&inject) = dlsym(probe, "InitializeInjection");
  if (inject == NULL || inject() != 1) return fail("InitializeInjection did not return 1");

  profiler_v5* nccl = (profiler_v5*)dlsym(probe, "ncclProfiler_v5");
  if (nccl == NULL || strcmp(nccl->name, "podscope") != 0)
    return fail("ncclProfiler_v5 missing or misnamed");
  void* context = NULL;
  int mask = -1;
  if (nccl->init(&context, 42, &mask, "world", 1, 1, 0, NULL) != 0) return fail("NCCL init failed");
  if (mask != 0) return fail("NCCL events switched on outside a capture window");

  /* The training loop goes on while the probe looks for its agent in the background. */
  /* The step API looked before the probe was there; it looks again within a second or two. */
  struct timespec tick = {0, 10000000};
  for (uint64_t step = 2; step < 400 && podscope_step_hooks_()->begin == 0; ++step) {
    podscope_step_begin(step);
    nanosleep(&tick, NULL);
    podscope_step_end(step);
  }
  if (podscope_step_hooks_()->begin == 0) return fail("step hooks did not find the loaded probe");
  if (nccl->finalize(context) != 0) return fail("NCCL finalize failed");
  printf("ok: probe loaded, inert without an agent\n");
  return 0;
}
