// Fuzz target for the host collector's /proc parsers (a container's /proc may be anything the
// agent is pointed at with --proc-root): any text gives a value or a clear error. The first
// byte picks the parser.
#include <string>

#include "agent/host/proc_stats.h"
#include "tests/fuzz/fuzz_seeds.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  namespace host = podscope::agent::host;
  switch (data[0] % 5) {
    case 0: {
      absl::StatusOr<host::CpuTimes> t = host::ParseCpuTimes(text, "stat");
      if (t.ok() && t->busy > t->total) __builtin_trap();
      break;
    }
    case 1:
      (void)host::ParseMemoryUsedBytes(text, "meminfo");
      break;
    case 2:
      (void)host::ParseNetBytes(text, "net/dev");
      break;
    case 3:
      (void)host::ParseProcessCpuTicks(text, "1/stat");
      break;
    case 4: {
      absl::StatusOr<int64_t> ppid = host::ParseParentPid(text, "1/stat");
      if (ppid.ok() && (*ppid < 0 || *ppid > (1 << 22))) __builtin_trap();
      break;
    }
  }
  return 0;
}

namespace podscope::fuzz {

std::vector<std::string> Seeds(const std::vector<std::string>&) {
  return {
      std::string(1, '\x00') +
          "cpu  4705 356 584 3699 23 0 12 0 0 0\ncpu0 1393280 32966 572056 13343292 6130 0 17875 0 "
          "0 0\n",
      std::string(1, '\x01') +
          "MemTotal:       16307252 kB\nMemFree:         1064340 kB\nMemAvailable:   14707252 kB\n",
      std::string(1, '\x02') +
          "Inter-|   Receive                            |  Transmit\n"
          " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs "
          "drop fifo colls carrier compressed\n"
          "    lo: 2776770   11307    0    0    0     0          0         0  2776770   11307    0 "
          "   0    0     0       0          0\n"
          "  eth0: 1215645    2751    0    0    0     0          0         0  1782404    4324    0 "
          "   0    0   427       0          0\n",
      std::string(1, '\x03') +
          "4242 (python3 (worker) x) S 1 4242 4242 0 -1 4194560 2043 0 0 0 120 30 0 0 20 0 9 0 "
          "1234 0 0\n",
      std::string(1, '\x04') + "4300 (pt_data_worker) S 4250 4242 4242 0 -1 4194624 0 0 0 0 5 6\n",
  };
}

}  // namespace podscope::fuzz
