// Starting real daemons on port 0 and talking HTTP/1.1 to them, for integration tests.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace podscope::testing {

struct HttpResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked when the response was chunked
  bool complete = true;                        // false: a chunked body that was cut short
};

// How HttpCall and RawExchange reach a port: plain HTTP unless a Daemon's log said "listening on
// https://" for it (then TLS with TestSecurity's CA and its admin token), or the test said so.
struct PortSecurity {
  bool tls = false;
  std::string ca_file;
  std::string token;  // sent as "Authorization: Bearer" by HttpCall (not by RawExchange)
};
void SetPortSecurity(int port, PortSecurity security);
PortSecurity GetPortSecurity(int port);

// One request on a fresh connection (Connection: close). status 0 when the connection failed.
HttpResult HttpCall(int port, const std::string& method, const std::string& target,
                    const std::string& body = "", const std::string& content_type = "");
// The same with another token ("" for none) than the port's.
HttpResult HttpCallWithToken(int port, const std::string& token, const std::string& method,
                             const std::string& target, const std::string& body = "",
                             const std::string& content_type = "",
                             const std::vector<std::pair<std::string, std::string>>& headers = {});
// Sends raw bytes (over TLS when the port is, with the port's token as a header after the first
// line) and returns whatever comes back (for malformed and truncated requests).
std::string RawExchange(int port, const std::string& bytes);

// A loopback TCP port free now (bound and released), outside the kernel's ephemeral range so
// that no outgoing connection takes it before the daemon listens, and never the same twice in a
// process: for daemons that cannot listen on port 0 and say which, or whose peers must know the
// port before they start.
int FreePort();

// `a` followed by `b` (argument lists).
inline std::vector<std::string> Concat(std::vector<std::string> a,
                                       const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The CLI's flags to reach a coordinator's REST port as TestSecurity's admin would:
// "--server https://127.0.0.1:PORT --ca-cert CA" (or http:// for a plaintext port). The token
// travels in PODSCOPE_TOKEN: CliEnv() is the prefix for a shell command line.
std::string CliServerFlags(int port);
std::string CliEnv(int port);

// Now on the Unix clock, in nanoseconds, as the daemons stamp what they report.
inline int64_t UnixNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A daemon process whose output goes to a log file; killed (SIGKILL) by the destructor if
// still running.
class Daemon {
 public:
  Daemon(const std::string& binary, const std::vector<std::string>& args,
         const std::string& log_path);
  ~Daemon();
  // Waits (up to 20 s) for "listening on http[s]://HOST:PORT" in the log; returns the port or -1.
  // An https port is registered (SetPortSecurity) with TestSecurity's CA and admin token.
  int WaitForPort();
  // Waits for `pattern` (ECMAScript regex) in the log; returns its first group (or the whole
  // match), or "" on timeout or if the process exited.
  std::string WaitForLog(const std::string& pattern, int timeout_ms = 20'000);
  std::string Log() const;
  void Signal(int signal_number);
  // SIGTERM, then waits for exit; returns the exit status (or -1). A daemon that already exited
  // (seen by WaitForLog or WaitForExit) gives its status.
  int Terminate();
  // Waits (no signal) for the daemon to exit by itself; its exit status, or -1 on timeout or a
  // signal.
  int WaitForExit(int timeout_ms = 20'000);
  void Kill();
  pid_t pid() const { return pid_; }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

}  // namespace podscope::testing
