// Turns raw Kineto events into rows of one WorkerTrace, then links what only makes sense
// once every event is in: collectives (kernel + launch + the op that issued it), process and
// thread names, step markers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/node_hash_set.h"
#include "common/kineto/raw_event.h"
#include "common/worker_trace.h"

namespace podscope::common {

struct ImportStats {
  uint64_t events = 0;          // trace events seen
  uint64_t kept = 0;            // became rows
  uint64_t flows = 0;           // ac2g flow events (correlation is taken from args instead)
  uint64_t metadata = 0;        // "M" events
  uint64_t profiler_spans = 0;  // cat "Trace" spans, dropped as HTA does
  uint64_t skipped = 0;         // other phases / categories podscope does not model
  uint64_t memory_events = 0;   // `[memory]` instants kept
};

// Owned by the importer for the duration of one file; single-threaded.
class TraceBuilder {
 public:
  explicit TraceBuilder(WorkerTrace* trace) : trace_(trace) {}

  // Adds one complete ("X") or metadata ("M") event. Flow/instant events are only counted.
  void Add(const RawEvent& event, ImportStats* stats);
  // Links collectives and names; call once after the last Add. The raw events' strings may be
  // gone by then: what Finish needs of them is kept.
  void Finish();

 private:
  struct CommSpan {
    int64_t thread;
    TimeNs start, end;
    std::string_view name;
    RawCollectiveArgs args;
  };
  struct CommKernel {
    size_t row;
    RawCollectiveArgs args;
  };
  struct NamedThing {
    int64_t pid, tid;
    std::string_view name;
  };

  void AddKernel(const RawEvent& e, KernelClass kernel_class);
  void AddMemcpy(const RawEvent& e, bool memset);
  void AddRuntimeCall(const RawEvent& e, ApiKind api_kind);
  void AddHostSpan(const RawEvent& e, HostSpanCategory category);
  void AddMetadata(const RawEvent& e);
  void AddMemoryEvent(const RawEvent& e, ImportStats* stats);
  void NoteHostPid(int64_t pid);
  void LinkCollectives();
  // A copy of `text` that lives as long as the builder (names repeat: each is kept once).
  std::string_view Kept(std::string_view text);
  RawCollectiveArgs Kept(RawCollectiveArgs args);
  int32_t RankInGroup(const RawCollectiveArgs& args);

  // Per-name classification caches (indexed by NameId): names repeat heavily, so each
  // distinct name is classified once. -1 = not yet classified.
  int8_t KernelClassOf(NameId name);
  int8_t HostCategoryOf(NameId name, HostSpanCategory by_category);

  WorkerTrace* trace_;
  std::vector<int8_t> nccl_kernel_name_;
  std::vector<int8_t> host_category_by_name_[kHostSpanCategoryCount];
  int64_t host_pid_ = kAbsent;
  std::vector<CommSpan> comm_spans_;
  std::vector<CommKernel> comm_kernels_;
  std::vector<NamedThing> process_names_, thread_names_;
  absl::node_hash_set<std::string> kept_;  // node-based: the views into it stay valid
};

// True for the host ops that issue collectives: record_param_comms, nccl:*, c10d::*.
bool IsCommunicationOpName(std::string_view name);

// "ProfilerStep#551" -> 551; -1 when `name` is not a step marker.
int64_t ProfilerStepNumber(std::string_view name);

}  // namespace podscope::common
