// A small hand-built worker trace with every event kind, and a deep comparison that resolves
// names (ids may differ between two tables holding the same strings).
#pragma once

#include <gtest/gtest.h>

#include "common/worker_trace.h"

namespace podscope::testing {

inline common::WorkerTrace MakeSampleTrace() {
  using namespace common;
  WorkerTrace w;
  w.info.rank = 2;
  w.info.world_size = 4;
  w.info.pid = 4242;
  w.info.host = "node-1";
  w.info.process_name = "python3";
  w.info.devices.push_back(DeviceInfo{0, "H100", 80ll << 30, 9, 0, 132});
  // The occupancy limits, each a different value so that a swapped field shows.
  w.info.devices.back().max_threads_per_sm = 2048;
  w.info.devices.back().max_threads_per_block = 1024;
  w.info.devices.back().registers_per_sm = 65536;
  w.info.devices.back().registers_per_block = 65535;
  w.info.devices.back().shared_memory_per_sm = 233472;
  w.info.devices.back().shared_memory_per_block_optin = 232448;
  w.info.process_groups.push_back(ProcessGroupInfo{"0", "default_pg", {0, 1, 2, 3}});
  w.info.tracks.push_back(TrackName{4242, false, "main"});
  w.clock = ClockModel{-1500, 20, 1'000'000'000'000, 40'000, ClockSource::kNetwork};
  const TimeNs t0 = 1'682'725'898'079'292'123;
  KernelTable& k = w.kernels;
  for (int i = 0; i < 3; ++i) {
    k.start.push_back(t0 + 1000 * i);
    k.end.push_back(t0 + 1000 * i + 800);
    k.device.push_back(0);
    k.stream.push_back(i == 2 ? 84 : 7);
    k.name.push_back(w.strings.Intern(i == 2 ? "ncclKernel_AllReduce_RING_LL_Sum_float" : "gemm"));
    k.correlation.push_back(100 + i);
    k.grid_x.push_back(16);
    k.grid_y.push_back(1);
    k.grid_z.push_back(1);
    k.block_x.push_back(256);
    k.block_y.push_back(1);
    k.block_z.push_back(1);
    k.registers_per_thread.push_back(64);
    k.shared_memory_bytes.push_back(4096);
    k.kernel_class.push_back(i == 2 ? KernelClass::kCommunication : KernelClass::kCompute);
  }
  MemcpyTable& m = w.memcpys;
  m.start = {t0 - 500};
  m.end = {t0 - 100};
  m.device = {0};
  m.stream = {7};
  m.name = {w.strings.Intern("Memcpy HtoD (Pinned -> Device)")};
  m.bytes = {1 << 20};
  m.correlation = {99};
  m.kind = {MemcpyKind::kHostToDevice};
  RuntimeCallTable& r = w.runtime_calls;
  for (int i = 0; i < 4; ++i) {
    r.start.push_back(t0 - 900 + 200 * i);
    r.end.push_back(t0 - 850 + 200 * i);
    r.thread.push_back(4242);
    r.name.push_back(w.strings.Intern(i == 0 ? "cudaMemcpyAsync" : "cudaLaunchKernel"));
    r.correlation.push_back(99 + i);
    r.external_id.push_back(7 + i);
    r.api_kind.push_back(ApiKind::kRuntime);
  }
  HostSpanTable& h = w.host_spans;
  h.start = {t0 - 2000, t0 - 1000};
  h.end = {t0 + 5000, t0 + 3000};
  h.thread = {4242, 4242};
  h.name = {w.strings.Intern("ProfilerStep#7"), w.strings.Intern("aten::mm")};
  h.category = {HostSpanCategory::kAnnotation, HostSpanCategory::kOp};
  h.step = {7, kNoStep};
  h.external_id = {-1, 8};
  CollectiveTable& c = w.collectives;
  c.communicator = {w.strings.Intern("pg:0")};
  c.rank = {2};
  c.nranks = {4};
  c.op = {CollectiveOp::kAllReduce};
  c.sequence = {12};
  c.count = {1000};
  c.dtype = {w.strings.Intern("float")};
  c.bytes = {4000};
  c.algorithm = {w.strings.Intern("RING")};
  c.protocol = {w.strings.Intern("LL")};
  c.channels = {16};
  c.enqueue = {t0 - 300};
  c.kernel_start = {t0 + 2000};
  c.kernel_end = {t0 + 2800};
  c.correlation = {102};
  StepTable& s = w.steps;
  s.number = {7};
  s.start = {t0 - 2000};
  s.end = {t0 + 5000};
  s.thread = {4242};
  HostSampleTable& hs = w.host_samples;
  hs.time = {t0, t0 + 100'000'000};
  hs.cpu_percent = {55.5f, 97.25f};
  hs.process_cpu_percent = {101.5f, -1.0f};
  hs.memory_used_bytes = {1ll << 33, 1ll << 34};
  hs.net_rx_bytes = {10, 20};
  hs.net_tx_bytes = {30, 40};
  hs.gpu_sm_clock_mhz = {1980, 1410};
  hs.gpu_power_mw = {700000, 690000};
  hs.gpu_temperature_c = {60, 84};
  hs.gpu_throttle_reasons = {0, 0x20};
  MemoryEventTable& me = w.memory_events;
  me.time = {t0 - 500, t0 + 100, t0 + 4000};
  me.device = {0, -1, 0};
  me.bytes = {1 << 20, 4096, -(1 << 20)};
  me.total_allocated = {3 << 20, 8192, 2 << 20};
  me.total_reserved = {8 << 20, kUnknownBytes, 8 << 20};
  me.thread = {4242, 4242, 4243};
  return w;
}

// Compares every column; the listed name columns by their strings (ids may differ).
template <typename Table>
void ExpectSameColumns(const Table& a, const Table& b, const common::StringTable& sa,
                       const common::StringTable& sb,
                       std::initializer_list<std::vector<common::NameId> Table::*> name_columns) {
  ASSERT_EQ(a.size(), b.size());
  std::vector<const void*> cols_b;
  b.ForEachColumn([&](const auto& col) { cols_b.push_back(&col); });
  int column = 0;
  a.ForEachColumn([&](const auto& col) {
    using Col = std::decay_t<decltype(col)>;
    const Col& other = *static_cast<const Col*>(cols_b[column]);
    bool is_name = false;
    for (auto member : name_columns) is_name |= static_cast<const void*>(&(a.*member)) == &col;
    if constexpr (std::is_same_v<Col, std::vector<common::NameId>>) {
      if (is_name) {
        for (size_t i = 0; i < col.size(); ++i) {
          ASSERT_TRUE(sa.Contains(col[i]) && sb.Contains(other[i])) << "column " << column;
          EXPECT_EQ(sa.Get(col[i]), sb.Get(other[i])) << "column " << column << " row " << i;
        }
        ++column;
        return;
      }
    }
    EXPECT_EQ(col, other) << "column " << column;
    ++column;
  });
}

inline void ExpectSameEvents(const common::WorkerTrace& a, const common::WorkerTrace& b) {
  using namespace common;
  ExpectSameColumns(a.kernels, b.kernels, a.strings, b.strings, {&KernelTable::name});
  ExpectSameColumns(a.memcpys, b.memcpys, a.strings, b.strings, {&MemcpyTable::name});
  ExpectSameColumns(a.runtime_calls, b.runtime_calls, a.strings, b.strings,
                    {&RuntimeCallTable::name});
  ExpectSameColumns(a.host_spans, b.host_spans, a.strings, b.strings, {&HostSpanTable::name});
  ExpectSameColumns(a.collectives, b.collectives, a.strings, b.strings,
                    {&CollectiveTable::communicator, &CollectiveTable::dtype,
                     &CollectiveTable::algorithm, &CollectiveTable::protocol});
  ExpectSameColumns(a.steps, b.steps, a.strings, b.strings, {});
  ExpectSameColumns(a.host_samples, b.host_samples, a.strings, b.strings, {});
  ExpectSameColumns(a.memory_events, b.memory_events, a.strings, b.strings, {});
}

}  // namespace podscope::testing
