// The NCCL profiler plugin interface, versions 5 and 4, declared here from NCCL's documented
// interface (plugins/profiler/README.md and the example plugin's headers in NCCL 2.28). NCCL
// dlopens NCCL_PROFILER_PLUGIN and looks for the symbol `ncclProfiler_v5`, then `_v4`.
//
// Declared by hand on purpose: the probe must not depend on NCCL's internal headers, and
// nccl.h's own ncclResult_t must never meet a second definition in one translation unit (this
// file names its result type NcclPluginResult and includes nothing of NCCL's). Layouts match
// the C structs member for member; a static_assert below pins the sizes we depend on.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace podscope::agent::probe::nccl_abi {

// ncclResult_t: the plugin only ever returns success, except from init (NCCL then disables it).
enum NcclPluginResult : int { kNcclSuccess = 0, kNcclInternalError = 3 };

// Event type bits (ncclProfileColl, ...): the activation mask and a descriptor's type.
enum : uint64_t {
  kProfileGroup = 1 << 0,
  kProfileColl = 1 << 1,
  kProfileP2p = 1 << 2,
  kProfileProxyOp = 1 << 3,
  kProfileProxyStep = 1 << 4,
  kProfileProxyCtrl = 1 << 5,
  kProfileKernelCh = 1 << 6,
  kProfileNetPlugin = 1 << 7,
  kProfileGroupApi = 1 << 8,
  kProfileCollApi = 1 << 9,
  kProfileP2pApi = 1 << 10,
  kProfileKernelLaunch = 1 << 11,
};

// ncclProfilerEventState_t values the probe reacts to.
enum NcclEventState : int { kKernelChStop = 22 };

using NcclDebugLogger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

struct EventDescrV5 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

// Version 4: the type is one byte and the API-level events do not exist.
struct EventDescrV4 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

// ncclProfilerEventStateArgs_v5_t and _v4_t are the same union.
union EventStateArgs {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
};

struct ProfilerV5 {
  const char* name;
  NcclPluginResult (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                           int nranks, int rank, NcclDebugLogger logfn);
  NcclPluginResult (*startEvent)(void* context, void** eHandle, EventDescrV5* eDescr);
  NcclPluginResult (*stopEvent)(void* eHandle);
  NcclPluginResult (*recordEventState)(void* eHandle, int eState, EventStateArgs* eStateArgs);
  NcclPluginResult (*finalize)(void* context);
};

struct ProfilerV4 {
  const char* name;
  NcclPluginResult (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                           int nranks, int rank, NcclDebugLogger logfn);
  NcclPluginResult (*startEvent)(void* context, void** eHandle, EventDescrV4* eDescr);
  NcclPluginResult (*stopEvent)(void* eHandle);
  NcclPluginResult (*recordEventState)(void* eHandle, int eState, EventStateArgs* eStateArgs);
  NcclPluginResult (*finalize)(void* context);
};

// The C layouts on x86-64 / aarch64 (LP64): pinned so an edit that shifts a member fails here.
static_assert(sizeof(EventDescrV5) == 112, "ncclProfilerEventDescr_v5_t layout");
static_assert(offsetof(EventDescrV5, coll.seqNumber) == 24, "coll starts after type, parentObj, rank");
static_assert(offsetof(EventDescrV5, coll.nChannels) == 80, "ncclProfilerEventDescr_v5_t coll layout");
static_assert(offsetof(EventDescrV5, kernelCh.pTimer) == 32, "ncclProfilerEventDescr_v5_t kernelCh layout");
static_assert(offsetof(EventDescrV4, coll.seqNumber) == 24, "ncclProfilerEventDescr_v4_t layout");
static_assert(sizeof(EventStateArgs) == 8, "ncclProfilerEventStateArgs layout");

}  // namespace podscope::agent::probe::nccl_abi
