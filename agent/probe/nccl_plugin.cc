#include "agent/probe/nccl_plugin.h"

#include <atomic>

namespace podscope::agent::probe {

namespace {

using namespace nccl_abi;

std::atomic<NcclRecorderProvider> g_provider{nullptr};
std::atomic<NcclVersionHook> g_version_hook{nullptr};

void TellVersion(const char* feature) {
  if (NcclVersionHook hook = g_version_hook.load(); hook != nullptr) hook(feature);
}

// The context NCCL keeps per communicator: the communicator and the recorder it belongs to.
struct PluginContext {
  NcclRecorder* recorder;
  NcclCommunicator* comm;
};

NcclPluginResult Init(void** context, uint64_t comm_id, int* mask, const char* name, int nranks,
                      int rank) {
  *context = nullptr;
  const NcclRecorderProvider provider = g_provider.load();
  NcclRecorder* recorder = provider != nullptr ? provider() : nullptr;
  if (recorder == nullptr) return kNcclInternalError;
  *context =
      new PluginContext{recorder, recorder->InitCommunicator(comm_id, name, nranks, rank, mask)};
  return kNcclSuccess;
}

NcclPluginResult Finalize(void* context) {
  auto* c = static_cast<PluginContext*>(context);
  if (c == nullptr) return kNcclSuccess;
  c->recorder->FinalizeCommunicator(c->comm);
  delete c;
  return kNcclSuccess;
}

// Collectives, point-to-point calls and kernel channels; everything else gets no handle.
template <typename Descr>
NcclPluginResult Start(void* context, void** handle, Descr* d) {
  *handle = nullptr;
  auto* c = static_cast<PluginContext*>(context);
  if (c == nullptr || d == nullptr) return kNcclSuccess;
  const uint64_t type = d->type;
  if (type == kProfileColl) {
    NcclCollectiveStart s;
    s.sequence = d->coll.seqNumber;
    s.func = d->coll.func;
    s.count = d->coll.count;
    s.datatype = d->coll.datatype;
    s.channels = d->coll.nChannels;
    s.algorithm = d->coll.algo;
    s.protocol = d->coll.proto;
    *handle = c->recorder->StartCollective(c->comm, s);
  } else if (type == kProfileP2p) {
    NcclCollectiveStart s;
    s.has_sequence = false;
    s.func = d->p2p.func;
    s.count = d->p2p.count;
    s.datatype = d->p2p.datatype;
    s.channels = d->p2p.nChannels;
    s.peer = d->p2p.peer;
    *handle = c->recorder->StartCollective(c->comm, s);
  } else if (type == kProfileKernelCh) {
    *handle = c->recorder->StartKernelChannel(d->parentObj, d->kernelCh.pTimer);
  }
  // Copy-engine collectives (v6) are not asked for: they run no kernel, so no kernel channel would
  // time them (their copies are in CUPTI's memcpy records). Sent anyway, they get no handle.
  return kNcclSuccess;
}

// Handles are numbers (nccl_recorder.h) that only the recorder of the probe can read; every
// recorder ignores a handle it does not know, so the one process-wide recorder is asked.
NcclRecorder* AnyRecorder() {
  const NcclRecorderProvider provider = g_provider.load();
  return provider != nullptr ? provider() : nullptr;
}

NcclPluginResult Stop(void* handle) { return kNcclSuccess; }

NcclPluginResult RecordState(void* handle, int state, EventStateArgs* args) {
  if (handle == nullptr || state != kKernelChStop || args == nullptr) return kNcclSuccess;
  if (NcclRecorder* recorder = AnyRecorder(); recorder != nullptr)
    recorder->StopKernelChannel(handle, args->kernelCh.pTimer);
  return kNcclSuccess;
}

NcclPluginResult InitV6(void** context, uint64_t comm_id, int* mask, const char* name, int nodes,
                        int nranks, int rank, NcclDebugLogger) {
  TellVersion("nccl-profiler-v6");
  return Init(context, comm_id, mask, name, nranks, rank);
}

NcclPluginResult InitV5(void** context, uint64_t comm_id, int* mask, const char* name, int nodes,
                        int nranks, int rank, NcclDebugLogger) {
  TellVersion("nccl-profiler-v5");
  return Init(context, comm_id, mask, name, nranks, rank);
}

NcclPluginResult InitV4(void** context, int* mask, const char* name, uint64_t comm_hash, int nodes,
                        int nranks, int rank, NcclDebugLogger) {
  TellVersion("nccl-profiler-v4");
  return Init(context, comm_hash, mask, name, nranks, rank);
}

NcclPluginResult StartV6(void* context, void** handle, EventDescrV6* d) {
  return Start(context, handle, d);
}
NcclPluginResult StartV5(void* context, void** handle, EventDescrV5* d) {
  return Start(context, handle, d);
}
NcclPluginResult StartV4(void* context, void** handle, EventDescrV4* d) {
  return Start(context, handle, d);
}

}  // namespace

void SetNcclRecorderProvider(NcclRecorderProvider provider) { g_provider.store(provider); }
void SetNcclVersionHook(NcclVersionHook hook) { g_version_hook.store(hook); }

const ProfilerV6 kNcclProfilerV6 = {"podscope", &InitV6, &StartV6, &Stop, &RecordState, &Finalize};
const ProfilerV5 kNcclProfilerV5 = {"podscope", &InitV5, &StartV5, &Stop, &RecordState, &Finalize};
const ProfilerV4 kNcclProfilerV4 = {"podscope", &InitV4, &StartV4, &Stop, &RecordState, &Finalize};

}  // namespace podscope::agent::probe
