// Node and process counters from /proc (HostSample). Every reader takes the
// proc root as a parameter, so tests point it at a fake tree with known contents.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace podscope::agent::host {

// /proc/stat's aggregate "cpu" line, in clock ticks since boot.
struct CpuTimes {
  uint64_t busy = 0;   // user + nice + system + irq + softirq + steal
  uint64_t total = 0;  // busy + idle + iowait
};
absl::StatusOr<CpuTimes> ReadCpuTimes(const std::string& proc_root);

// /proc/meminfo: MemTotal - MemAvailable, in bytes.
absl::StatusOr<int64_t> ReadMemoryUsedBytes(const std::string& proc_root);

// The node's received and sent bytes, summed over every interface but loopback, from
// <proc_root>/1/net/dev: the interfaces of the network namespace of PID 1, the node's init.
// <proc_root>/net/dev would be the reader's own namespace (/proc/net is /proc/self/net), which in
// a pod is the pod's. PID 1 is the node's init both for the host's /proc read from the host's
// namespaces (systemd) and for the host's procfs mounted into a container (/host/proc), with or
// without the host's PID namespace: that mount numbers pids as the host does.
struct NetBytes {
  uint64_t rx = 0;
  uint64_t tx = 0;
};
absl::StatusOr<NetBytes> ReadNetBytes(const std::string& proc_root);

// /proc/<pid>/stat: utime + stime of the process, in clock ticks.
absl::StatusOr<uint64_t> ReadProcessCpuTicks(const std::string& proc_root, int64_t pid);

// /proc/<pid>/stat: the parent's pid (0 for init and kernel threads).
absl::StatusOr<int64_t> ReadParentPid(const std::string& proc_root, int64_t pid);

// The parsers behind the readers, on a file's text (`path` names it in errors).
absl::StatusOr<CpuTimes> ParseCpuTimes(const std::string& text, std::string_view path);
absl::StatusOr<int64_t> ParseMemoryUsedBytes(const std::string& text, std::string_view path);
absl::StatusOr<NetBytes> ParseNetBytes(const std::string& text, std::string_view path);
absl::StatusOr<uint64_t> ParseProcessCpuTicks(const std::string& text, std::string_view path);
absl::StatusOr<int64_t> ParseParentPid(const std::string& text, std::string_view path);

// Percent of the node's CPUs busy between two readings (0..100); -1 when no time passed.
float NodeCpuPercent(const CpuTimes& before, const CpuTimes& after);
// Percent of one core a process used over `elapsed_ns` (100 = one core busy); -1 if unknown.
float ProcessCpuPercent(uint64_t ticks_before, uint64_t ticks_after, int64_t elapsed_ns,
                        int64_t ticks_per_second);

}  // namespace podscope::agent::host
