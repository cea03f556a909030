// The NCCL profiler plugin interface, versions 6, 5 and 4, declared here from NCCL's documented
// interface (plugins/profiler/README.md and the example plugin's headers: profiler_v6.h from
// NCCL 2.29, profiler_v5.h from 2.28). NCCL dlopens NCCL_PROFILER_PLUGIN and looks for the
// symbol `ncclProfiler_v6`, then `_v5`, then `_v4`.
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
  // Version 6 (NCCL 2.29): collectives run by the copy engines, their syncs and batches. NCCL
  // reports only their start and stop (never a state); the plugin is left to time them.
  kProfileCeColl = 1 << 12,
  kProfileCeSync = 1 << 13,
  kProfileCeBatch = 1 << 14,
};

// ncclProfilerEventState_t values the probe reacts to.
enum NcclEventState : int { kKernelChStop = 22 };

using NcclDebugLogger = void (*)(int level, unsigned long flags, const char* file, int line,
                                 const char* fmt, ...);

// The union members versions 5 and 6 share, as one macro so that the two layouts cannot drift.
#define PODSCOPE_NCCL_V5_EVENTS \
  struct {                      \
    bool graphCaptured;         \
    int groupDepth;             \
  } groupApi;                   \
  struct {                      \
    const char* func;           \
    size_t count;               \
    const char* datatype;       \
    int root;                   \
    void* stream;               \
    bool graphCaptured;         \
  } collApi;                    \
  struct {                      \
    const char* func;           \
    size_t count;               \
    const char* datatype;       \
    void* stream;               \
    bool graphCaptured;         \
  } p2pApi;                     \
  struct {                      \
    void* stream;               \
  } kernelLaunch;               \
  struct {                      \
    uint64_t seqNumber;         \
    const char* func;           \
    const void* sendBuff;       \
    void* recvBuff;             \
    size_t count;               \
    int root;                   \
    const char* datatype;       \
    uint8_t nChannels;          \
    uint8_t nWarps;             \
    const char* algo;           \
    const char* proto;          \
    void* parentGroup;          \
  } coll;                       \
  struct {                      \
    const char* func;           \
    void* buff;                 \
    const char* datatype;       \
    size_t count;               \
    int peer;                   \
    uint8_t nChannels;          \
    void* parentGroup;          \
  } p2p;                        \
  struct {                      \
    pid_t pid;                  \
    uint8_t channelId;          \
    int peer;                   \
    int nSteps;                 \
    int chunkSize;              \
    int isSend;                 \
  } proxyOp;                    \
  struct {                      \
    int step;                   \
  } proxyStep;                  \
  struct {                      \
    uint8_t channelId;          \
    uint64_t pTimer;            \
  } kernelCh;                   \
  struct {                      \
    int64_t id;                 \
    void* data;                 \
  } netPlugin;

struct EventDescrV6 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    PODSCOPE_NCCL_V5_EVENTS
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void* stream;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
};

struct EventDescrV5 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    PODSCOPE_NCCL_V5_EVENTS
  };
};
#undef PODSCOPE_NCCL_V5_EVENTS

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

// Version 6: version 5's calls with the larger descriptor; its state arguments are version 5's.
struct ProfilerV6 {
  const char* name;
  NcclPluginResult (*init)(void** context, uint64_t commId, int* eActivationMask,
                           const char* commName, int nNodes, int nranks, int rank,
                           NcclDebugLogger logfn);
  NcclPluginResult (*startEvent)(void* context, void** eHandle, EventDescrV6* eDescr);
  NcclPluginResult (*stopEvent)(void* eHandle);
  NcclPluginResult (*recordEventState)(void* eHandle, int eState, EventStateArgs* eStateArgs);
  NcclPluginResult (*finalize)(void* context);
};

struct ProfilerV5 {
  const char* name;
  NcclPluginResult (*init)(void** context, uint64_t commId, int* eActivationMask,
                           const char* commName, int nNodes, int nranks, int rank,
                           NcclDebugLogger logfn);
  NcclPluginResult (*startEvent)(void* context, void** eHandle, EventDescrV5* eDescr);
  NcclPluginResult (*stopEvent)(void* eHandle);
  NcclPluginResult (*recordEventState)(void* eHandle, int eState, EventStateArgs* eStateArgs);
  NcclPluginResult (*finalize)(void* context);
};

struct ProfilerV4 {
  const char* name;
  NcclPluginResult (*init)(void** context, int* eActivationMask, const char* commName,
                           uint64_t commHash, int nNodes, int nranks, int rank,
                           NcclDebugLogger logfn);
  NcclPluginResult (*startEvent)(void* context, void** eHandle, EventDescrV4* eDescr);
  NcclPluginResult (*stopEvent)(void* eHandle);
  NcclPluginResult (*recordEventState)(void* eHandle, int eState, EventStateArgs* eStateArgs);
  NcclPluginResult (*finalize)(void* context);
};

// The C layouts on x86-64 / aarch64 (LP64): pinned so an edit that shifts a member fails here.
static_assert(sizeof(EventDescrV6) == 112,
              "ncclProfilerEventDescr_v6_t layout: ceColl is as large as coll");
static_assert(offsetof(EventDescrV6, coll.nChannels) == 80,
              "ncclProfilerEventDescr_v6_t coll layout");
static_assert(offsetof(EventDescrV6, kernelCh.pTimer) == 32,
              "ncclProfilerEventDescr_v6_t kernelCh layout");
static_assert(offsetof(EventDescrV6, ceColl.seqNumber) == 24,
              "ceColl starts after type, parentObj, rank");
static_assert(offsetof(EventDescrV6, ceColl.syncStrategy) == 80,
              "ncclProfilerEventDescr_v6_t ceColl layout");
static_assert(offsetof(EventDescrV6, ceColl.batchSize) == 92,
              "ncclProfilerEventDescr_v6_t ceColl layout");
static_assert(offsetof(EventDescrV6, ceColl.stream) == 104,
              "ncclProfilerEventDescr_v6_t ceColl layout");
static_assert(offsetof(EventDescrV6, ceCollBatch.totalBytes) == 32,
              "ncclProfilerEventDescr_v6_t ceCollBatch layout");
static_assert(sizeof(EventDescrV5) == 112, "ncclProfilerEventDescr_v5_t layout");
static_assert(offsetof(EventDescrV5, coll.seqNumber) == 24,
              "coll starts after type, parentObj, rank");
static_assert(offsetof(EventDescrV5, coll.nChannels) == 80,
              "ncclProfilerEventDescr_v5_t coll layout");
static_assert(offsetof(EventDescrV5, kernelCh.pTimer) == 32,
              "ncclProfilerEventDescr_v5_t kernelCh layout");
static_assert(offsetof(EventDescrV4, coll.seqNumber) == 24, "ncclProfilerEventDescr_v4_t layout");
static_assert(sizeof(EventStateArgs) == 8, "ncclProfilerEventStateArgs layout");

}  // namespace podscope::agent::probe::nccl_abi
