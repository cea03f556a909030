#include "agent/host/proc_stats.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::agent::host {

namespace {

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(common::StrCat("cannot read ", path));
  std::string text;
  // /proc files are small; a bound keeps a pathological one (or a wrong root) from costing much.
  text.resize(1 << 20);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// The next whitespace-separated field as an unsigned decimal counter. istream's >> would take
// "-2" for 2^64 - 2 (and a sum of such counters wraps): a counter is digits only, at most 2^60.
bool NextCounter(std::istringstream& in, uint64_t* out) {
  std::string field;
  if (!(in >> field)) return false;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), *out);
  return ec == std::errc() && end == field.data() + field.size() && *out <= (uint64_t{1} << 60);
}

}  // namespace

absl::StatusOr<CpuTimes> ReadCpuTimes(const std::string& proc_root) {
  const std::string path = proc_root + "/stat";
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path));
  return ParseCpuTimes(text, path);
}

absl::StatusOr<CpuTimes> ParseCpuTimes(const std::string& text, std::string_view path) {
  std::istringstream in(text);
  std::string label;
  in >> label;
  if (label != "cpu")
    return absl::DataLossError(
        common::StrCat(path, ": the first line is not the aggregate \"cpu\" line"));
  // user nice system idle iowait irq softirq steal [guest guest_nice: already inside user/nice]
  uint64_t v[8] = {0};
  std::string line;
  std::getline(in, line);
  std::istringstream fields(line);
  for (int i = 0; i < 8; ++i) {
    if (!NextCounter(fields, &v[i])) {
      if (i >= 4 && fields.eof()) break;  // very old kernels stop after idle
      return absl::DataLossError(
          common::StrCat(path, ": the cpu line's field ", i + 1,
                         i >= 4 ? " is not a counter" : " is missing or not a counter"));
    }
  }
  CpuTimes t;
  t.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  t.total = t.busy + v[3] + v[4];
  return t;
}

absl::StatusOr<int64_t> ReadMemoryUsedBytes(const std::string& proc_root) {
  const std::string path = proc_root + "/meminfo";
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path));
  return ParseMemoryUsedBytes(text, path);
}

absl::StatusOr<int64_t> ParseMemoryUsedBytes(const std::string& text, std::string_view path) {
  std::istringstream in(text);
  std::string key, unit;
  int64_t value = 0, total = -1, available = -1;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemTotal:") total = value;
    if (key == "MemAvailable:") available = value;
  }
  if (total < 0 || available < 0)
    return absl::DataLossError(common::StrCat(path, ": no MemTotal / MemAvailable"));
  if (total > (int64_t{1} << 50) || available > total) {
    return absl::DataLossError(common::StrCat(path, ": MemTotal ", total, " kB and MemAvailable ",
                                              available, " kB make no sense"));
  }
  return (total - available) * 1024;
}

absl::StatusOr<NetBytes> ReadNetBytes(const std::string& proc_root) {
  const std::string path = proc_root + "/1/net/dev";
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path));
  return ParseNetBytes(text, path);
}

absl::StatusOr<NetBytes> ParseNetBytes(const std::string& text, std::string_view path) {
  std::istringstream in(text);
  std::string line;
  NetBytes sum;
  int interfaces = 0;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;  // the two header lines
    const std::string name(common::StripWhitespace(std::string_view(line).substr(0, colon)));
    if (name == "lo") continue;
    std::istringstream fields(line.substr(colon + 1));
    uint64_t f[9] = {0};
    int n = 0;
    while (n < 9 && NextCounter(fields, &f[n])) ++n;
    if (n < 9)
      return absl::DataLossError(
          common::StrCat(path, ": interface ", name, " has ", n, " counters, want 16"));
    sum.rx += f[0];  // receive bytes
    sum.tx += f[8];  // transmit bytes
    ++interfaces;
  }
  if (interfaces == 0 && text.find("Inter-") == std::string::npos) {
    return absl::DataLossError(common::StrCat(path, ": not a net/dev table"));
  }
  return sum;
}

namespace {

// A process's <proc_root>/<pid>/stat, parsed by `parse`.
template <typename Parse>
auto ReadProcessStat(const std::string& proc_root, int64_t pid, Parse parse)
    -> decltype(parse(std::string(), std::string_view())) {
  const std::string path = common::StrCat(proc_root, "/", pid, "/stat");
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path));
  return parse(text, path);
}

// The fields of a stat line from field 3 (state) on. "pid (comm) state ppid ...": comm may hold
// spaces and ')', so fields count from the last ')'.
absl::StatusOr<std::istringstream> FieldsAfterComm(const std::string& text, std::string_view path) {
  const size_t close = text.rfind(')');
  if (close == std::string::npos)
    return absl::DataLossError(common::StrCat(path, ": no \"(comm)\""));
  return std::istringstream(text.substr(close + 1));
}

}  // namespace

absl::StatusOr<uint64_t> ReadProcessCpuTicks(const std::string& proc_root, int64_t pid) {
  return ReadProcessStat(proc_root, pid, ParseProcessCpuTicks);
}

absl::StatusOr<uint64_t> ParseProcessCpuTicks(const std::string& text, std::string_view path) {
  ASSIGN_OR_RETURN(std::istringstream fields, FieldsAfterComm(text, path));
  std::istringstream& in = fields;
  std::string field;
  uint64_t utime = 0, stime = 0;
  // Field 3 (state) is the first after ')'; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15; ++i) {
    if (!(in >> field)) return absl::DataLossError(common::StrCat(path, ": ends before field ", i));
    if (i != 14 && i != 15) continue;
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (ec != std::errc() || end != field.data() + field.size() || value > (uint64_t{1} << 60)) {
      return absl::DataLossError(
          common::StrCat(path, ": field ", i, " is '", field, "', not a tick count"));
    }
    (i == 14 ? utime : stime) = value;
  }
  return utime + stime;
}

absl::StatusOr<int64_t> ReadParentPid(const std::string& proc_root, int64_t pid) {
  return ReadProcessStat(proc_root, pid, ParseParentPid);
}

absl::StatusOr<int64_t> ParseParentPid(const std::string& text, std::string_view path) {
  ASSIGN_OR_RETURN(std::istringstream fields, FieldsAfterComm(text, path));
  std::istringstream& in = fields;
  std::string state, field;
  if (!(in >> state >> field))
    return absl::DataLossError(common::StrCat(path, ": ends before field 4"));
  int64_t ppid = -1;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), ppid);
  // pid_max is at most 2^22.
  if (ec != std::errc() || end != field.data() + field.size() || ppid < 0 || ppid > (1 << 22)) {
    return absl::DataLossError(
        common::StrCat(path, ": field 4 is '", field, "', not a parent's pid"));
  }
  return ppid;
}

float NodeCpuPercent(const CpuTimes& before, const CpuTimes& after) {
  if (after.total <= before.total || after.busy < before.busy) return -1;
  return 100.0f * static_cast<float>(after.busy - before.busy) /
         static_cast<float>(after.total - before.total);
}

float ProcessCpuPercent(uint64_t ticks_before, uint64_t ticks_after, int64_t elapsed_ns,
                        int64_t ticks_per_second) {
  if (elapsed_ns <= 0 || ticks_per_second <= 0 || ticks_after < ticks_before) return -1;
  const double seconds_busy =
      static_cast<double>(ticks_after - ticks_before) / static_cast<double>(ticks_per_second);
  return static_cast<float>(100.0 * seconds_busy / (static_cast<double>(elapsed_ns) / 1e9));
}

}  // namespace podscope::agent::host
