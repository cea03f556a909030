// Wait vs transfer: collectives matched across ranks, and for every rank-local
// collective how long it waited for the last rank to arrive and how long it moved data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/intervals.h"
#include "common/capture.h"

namespace podscope::analysis {

enum class ClockTrust : uint8_t { kAuto = 0, kAligned = 1, kUnaligned = 2 };

struct CommunicationOptions {
  // kAuto: arrivals are compared on the aligned clock when every worker has a fitted clock
  // model, or all workers name the same host; otherwise the min-duration fallback is used.
  ClockTrust clocks = ClockTrust::kAuto;
};

// What arrivals on different workers were compared on, and so whether the clock error bound is
// known: fitted clock models (the largest model's bound), one host's clock (0), clocks the user
// declared aligned (unknown), or none (the min-duration fallback).
enum class ClockBasis : uint8_t { kFittedModels, kOneHost, kAsserted, kNotCompared };
std::string_view ClockBasisName(ClockBasis basis);

struct Participant {
  uint32_t worker = 0;  // index in the CaptureView
  uint32_t row = 0;     // row in that worker's CollectiveTable
  TimeNs arrival = 0;   // kernel start on the aligned clock
  TimeNs duration = 0;
  TimeNs wait = 0;
  TimeNs transfer = 0;
};

// One collective as all captured ranks ran it.
struct MatchedCollective {
  std::string communicator;
  common::CollectiveOp op = common::CollectiveOp::kUnknown;
  int64_t sequence = 0;  // the source's sequence number, or the ordinal when it has none
  int64_t bytes = 0;     // largest over participants
  int32_t nranks = 0;
  std::vector<Participant> participants;  // by worker index
};

struct CommunicationReport {
  bool aligned = false;  // arrivals compared on aligned clocks
  ClockBasis clock_basis = ClockBasis::kNotCompared;
  TimeNs clock_error_bound_ns = 0;  // largest error bound among the workers' clock models
  bool clock_bound_known() const {
    return clock_basis == ClockBasis::kFittedModels || clock_basis == ClockBasis::kOneHost;
  }
  std::vector<MatchedCollective> collectives;  // by first arrival
  // wait[w][row]: wait of worker w's collective row (0 when unmatched).
  std::vector<std::vector<TimeNs>> wait;
  struct WorkerTotals {
    int32_t rank = 0;
    size_t collectives = 0;
    TimeNs wait_ns = 0;
    TimeNs transfer_ns = 0;
  };
  std::vector<WorkerTotals> workers;
};

// Pure; any thread.
CommunicationReport ComputeCommunication(const common::CaptureView& capture,
                                         const CommunicationOptions& options = {});

// Whether arrivals of different workers can be compared (see CommunicationOptions).
bool ClocksComparable(const common::CaptureView& capture, ClockTrust trust);

}  // namespace podscope::analysis
