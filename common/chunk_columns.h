// How each table of the trace model travels in a chunk (chunk_codec.cc): one list of columns
// per table, which the encoder, the checker and the decoder all walk. A new column of the trace
// model is added to its table's list here, and nowhere else in the codec; ChunkColumnsTest
// proves every column of every table survives the round trip.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common/trace_model.h"
#include "common/worker_trace.h"
#include "podscope/v1/trace.pb.h"

namespace podscope::common::chunk {

// How one column is written.
enum class Coding {
  kValues,    // as is
  kDeltas,    // each value minus the previous one (int64; wraps, so any value round-trips)
  kNames,     // string-table ids, remapped into the receiver's table
  kEnum,      // one byte per row, below `enum_count`
  kSpan,      // the distance from the row's value in `base` (an end as a duration)
  kOptional,  // as is, or absent, meaning `absent` in every row
};

// Column `values` of `Table` as field `get`/`mut` of the protobuf message `Proto`.
template <typename Table, typename Proto, typename T, typename Field>
struct Column {
  std::string_view name;  // the protobuf field's, for errors
  Coding coding;
  std::vector<T> Table::*values;
  const Field& (Proto::*get)() const;
  Field* (Proto::*mut)();
  std::vector<TimeNs> Table::*base = nullptr;  // kSpan
  int enum_count = 0;                          // kEnum
  T absent{};                                  // kOptional
};

template <typename Table, typename Proto, typename T, typename Field>
constexpr Column<Table, Proto, T, Field> Col(std::string_view name, Coding coding,
                                             std::vector<T> Table::*values,
                                             const Field& (Proto::*get)() const,
                                             Field* (Proto::*mut)()) {
  return {name, coding, values, get, mut};
}
template <typename Table, typename Proto, typename Field>
constexpr Column<Table, Proto, TimeNs, Field> Span(std::string_view name,
                                                   std::vector<TimeNs> Table::*values,
                                                   std::vector<TimeNs> Table::*base,
                                                   const Field& (Proto::*get)() const,
                                                   Field* (Proto::*mut)()) {
  return {name, Coding::kSpan, values, get, mut, base};
}
template <typename Table, typename Proto, typename T>
constexpr Column<Table, Proto, T, std::string> Enum(std::string_view name,
                                                    std::vector<T> Table::*values, int count,
                                                    const std::string& (Proto::*get)() const,
                                                    std::string* (Proto::*mut)()) {
  return {name, Coding::kEnum, values, get, mut, nullptr, count};
}
template <typename Table, typename Proto, typename T, typename Field>
constexpr Column<Table, Proto, T, Field> Optional(std::string_view name,
                                                  std::vector<T> Table::*values, T absent,
                                                  const Field& (Proto::*get)() const,
                                                  Field* (Proto::*mut)()) {
  return {name, Coding::kOptional, values, get, mut, nullptr, 0, absent};
}

// One table: where it lives in a WorkerTrace and in a chunk, and its columns in decoding order
// (a span's base before the span).
template <typename Table, typename Proto, typename... Columns>
struct TableCodec {
  std::string_view name;
  Table WorkerTrace::*table;
  const Proto& (v1::TraceChunk::*get)() const;
  Proto* (v1::TraceChunk::*mut)();
  bool written_when_empty;  // older readers expect these tables present even when empty
  std::tuple<Columns...> columns;
};

template <typename Table, typename Proto, typename... Columns>
constexpr TableCodec<Table, Proto, Columns...> Codec(std::string_view name,
                                                     Table WorkerTrace::*table,
                                                     const Proto& (v1::TraceChunk::*get)() const,
                                                     Proto* (v1::TraceChunk::*mut)(),
                                                     bool written_when_empty, Columns... columns) {
  return {name, table, get, mut, written_when_empty, std::tuple<Columns...>(columns...)};
}

// Every table of a chunk, and every column of each: PODSCOPE_COL(coding, table type, columns
// message, table column, protobuf field); a span names its base column; an enum its count.
#define PODSCOPE_COL(coding, T, P, column, field) \
  Col(#field, Coding::coding, &T::column, &P::field, &P::mutable_##field)
#define PODSCOPE_SPAN(T, P, column, base, field) \
  Span(#field, &T::column, &T::base, &P::field, &P::mutable_##field)
#define PODSCOPE_ENUM(T, P, column, count, field) \
  Enum(#field, &T::column, count, &P::field, &P::mutable_##field)

inline const auto& Tables() {
  using K = KernelTable;
  using KC = v1::KernelColumns;
  using M = MemcpyTable;
  using MC = v1::MemcpyColumns;
  using R = RuntimeCallTable;
  using RC = v1::RuntimeCallColumns;
  using H = HostSpanTable;
  using HC = v1::HostSpanColumns;
  using C = CollectiveTable;
  using CC = v1::CollectiveColumns;
  using S = StepTable;
  using SC = v1::StepColumns;
  using HS = HostSampleTable;
  using HSC = v1::HostSampleColumns;
  using ME = MemoryEventTable;
  using MEC = v1::MemoryEventColumns;
  using TC = v1::TraceChunk;
  static const auto kTables = std::make_tuple(
      Codec("kernels", &WorkerTrace::kernels, &TC::kernels, &TC::mutable_kernels, true,
            PODSCOPE_COL(kDeltas, K, KC, start, start_delta),
            PODSCOPE_SPAN(K, KC, end, start, duration),
            PODSCOPE_COL(kValues, K, KC, device, device),
            PODSCOPE_COL(kValues, K, KC, stream, stream), PODSCOPE_COL(kNames, K, KC, name, name),
            PODSCOPE_COL(kDeltas, K, KC, correlation, correlation_delta),
            PODSCOPE_COL(kValues, K, KC, grid_x, grid_x),
            PODSCOPE_COL(kValues, K, KC, grid_y, grid_y),
            PODSCOPE_COL(kValues, K, KC, grid_z, grid_z),
            PODSCOPE_COL(kValues, K, KC, block_x, block_x),
            PODSCOPE_COL(kValues, K, KC, block_y, block_y),
            PODSCOPE_COL(kValues, K, KC, block_z, block_z),
            PODSCOPE_COL(kValues, K, KC, registers_per_thread, registers_per_thread),
            PODSCOPE_COL(kValues, K, KC, shared_memory_bytes, shared_memory_bytes),
            PODSCOPE_ENUM(K, KC, kernel_class, kKernelClassCount, kernel_class)),
      Codec("memcpys", &WorkerTrace::memcpys, &TC::memcpys, &TC::mutable_memcpys, true,
            PODSCOPE_COL(kDeltas, M, MC, start, start_delta),
            PODSCOPE_SPAN(M, MC, end, start, duration),
            PODSCOPE_COL(kValues, M, MC, device, device),
            PODSCOPE_COL(kValues, M, MC, stream, stream), PODSCOPE_COL(kNames, M, MC, name, name),
            PODSCOPE_COL(kValues, M, MC, bytes, bytes),
            PODSCOPE_COL(kDeltas, M, MC, correlation, correlation_delta),
            PODSCOPE_ENUM(M, MC, kind, kMemcpyKindCount, kind)),
      Codec("runtime_calls", &WorkerTrace::runtime_calls, &TC::runtime_calls,
            &TC::mutable_runtime_calls, true, PODSCOPE_COL(kDeltas, R, RC, start, start_delta),
            PODSCOPE_SPAN(R, RC, end, start, duration),
            PODSCOPE_COL(kValues, R, RC, thread, thread), PODSCOPE_COL(kNames, R, RC, name, name),
            PODSCOPE_COL(kDeltas, R, RC, correlation, correlation_delta),
            PODSCOPE_COL(kDeltas, R, RC, external_id, external_id_delta),
            PODSCOPE_ENUM(R, RC, api_kind, kApiKindCount, api_kind)),
      Codec("host_spans", &WorkerTrace::host_spans, &TC::host_spans, &TC::mutable_host_spans, true,
            PODSCOPE_COL(kDeltas, H, HC, start, start_delta),
            PODSCOPE_SPAN(H, HC, end, start, duration),
            PODSCOPE_COL(kValues, H, HC, thread, thread), PODSCOPE_COL(kNames, H, HC, name, name),
            PODSCOPE_ENUM(H, HC, category, kHostSpanCategoryCount, category),
            PODSCOPE_COL(kValues, H, HC, step, step),
            PODSCOPE_COL(kDeltas, H, HC, external_id, external_id_delta)),
      Codec("collectives", &WorkerTrace::collectives, &TC::collectives, &TC::mutable_collectives,
            true, PODSCOPE_COL(kNames, C, CC, communicator, communicator),
            PODSCOPE_COL(kValues, C, CC, rank, rank), PODSCOPE_COL(kValues, C, CC, nranks, nranks),
            PODSCOPE_ENUM(C, CC, op, kCollectiveOpCount, op),
            PODSCOPE_COL(kValues, C, CC, sequence, sequence),
            PODSCOPE_COL(kValues, C, CC, count, count), PODSCOPE_COL(kNames, C, CC, dtype, dtype),
            PODSCOPE_COL(kValues, C, CC, bytes, bytes),
            PODSCOPE_COL(kNames, C, CC, algorithm, algorithm),
            PODSCOPE_COL(kNames, C, CC, protocol, protocol),
            PODSCOPE_COL(kValues, C, CC, channels, channels),
            PODSCOPE_COL(kDeltas, C, CC, enqueue, enqueue_delta),
            PODSCOPE_SPAN(C, CC, kernel_start, enqueue, kernel_start_offset),
            PODSCOPE_SPAN(C, CC, kernel_end, kernel_start, kernel_duration),
            PODSCOPE_COL(kDeltas, C, CC, correlation, correlation_delta)),
      Codec("steps", &WorkerTrace::steps, &TC::steps, &TC::mutable_steps, true,
            PODSCOPE_COL(kValues, S, SC, number, number),
            PODSCOPE_COL(kDeltas, S, SC, start, start_delta),
            PODSCOPE_SPAN(S, SC, end, start, duration),
            PODSCOPE_COL(kValues, S, SC, thread, thread)),
      Codec("host_samples", &WorkerTrace::host_samples, &TC::host_samples,
            &TC::mutable_host_samples, true, PODSCOPE_COL(kDeltas, HS, HSC, time, time_delta),
            PODSCOPE_COL(kValues, HS, HSC, cpu_percent, cpu_percent),
            // Chunks from before the column have none: the process's share is unknown.
            Optional("process_cpu_percent", &HS::process_cpu_percent, -1.0f,
                     &HSC::process_cpu_percent, &HSC::mutable_process_cpu_percent),
            PODSCOPE_COL(kValues, HS, HSC, memory_used_bytes, memory_used_bytes),
            PODSCOPE_COL(kValues, HS, HSC, net_rx_bytes, net_rx_bytes),
            PODSCOPE_COL(kValues, HS, HSC, net_tx_bytes, net_tx_bytes),
            PODSCOPE_COL(kValues, HS, HSC, gpu_sm_clock_mhz, gpu_sm_clock_mhz),
            PODSCOPE_COL(kValues, HS, HSC, gpu_power_mw, gpu_power_mw),
            PODSCOPE_COL(kValues, HS, HSC, gpu_temperature_c, gpu_temperature_c),
            PODSCOPE_COL(kValues, HS, HSC, gpu_throttle_reasons, gpu_throttle_reasons)),
      Codec("memory_events", &WorkerTrace::memory_events, &TC::memory_events,
            &TC::mutable_memory_events, false, PODSCOPE_COL(kDeltas, ME, MEC, time, time_delta),
            PODSCOPE_COL(kValues, ME, MEC, device, device),
            PODSCOPE_COL(kValues, ME, MEC, bytes, bytes),
            PODSCOPE_COL(kValues, ME, MEC, total_allocated, total_allocated),
            PODSCOPE_COL(kValues, ME, MEC, total_reserved, total_reserved),
            PODSCOPE_COL(kValues, ME, MEC, thread, thread)));
  return kTables;
}

#undef PODSCOPE_COL
#undef PODSCOPE_SPAN
#undef PODSCOPE_ENUM

// Calls f(table codec) for every table, in order.
template <typename F>
void ForEachTable(F&& f) {
  std::apply([&](const auto&... table) { (f(table), ...); }, Tables());
}

// Calls f(column) for every column of `table`, in decoding order.
template <typename TableCodecT, typename F>
void ForEachColumn(const TableCodecT& table, F&& f) {
  std::apply([&](const auto&... column) { (f(column), ...); }, table.columns);
}

}  // namespace podscope::common::chunk
