#include "tests/integration/daemon.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "common/client_connection.h"
#include "common/parse_number.h"
#include "gtest/gtest.h"
#include "http/http_types.h"
#include "tests/integration/test_security.h"
#include "tests/wait_for.h"

namespace podscope::testing {
namespace {

absl::Mutex security_mu;
std::map<int, PortSecurity>& Ports() ABSL_EXCLUSIVE_LOCKS_REQUIRED(security_mu) {
  static auto* ports = new std::map<int, PortSecurity>();
  return *ports;
}

}  // namespace

void SetPortSecurity(int port, PortSecurity security) {
  absl::MutexLock lock(&security_mu);
  Ports()[port] = std::move(security);
}

PortSecurity GetPortSecurity(int port) {
  absl::MutexLock lock(&security_mu);
  const auto found = Ports().find(port);
  return found == Ports().end() ? PortSecurity{} : found->second;
}

std::string CliServerFlags(int port) {
  const PortSecurity security = GetPortSecurity(port);
  return security.tls ? "--server https://127.0.0.1:" + std::to_string(port) + " --ca-cert " +
                            security.ca_file
                      : "--server http://127.0.0.1:" + std::to_string(port);
}

std::string CliEnv(int port) {
  const PortSecurity security = GetPortSecurity(port);
  return security.token.empty() ? "" : "PODSCOPE_TOKEN=" + security.token + " ";
}

namespace {

std::string Exchange(int port, const std::string& bytes, bool add_token) {
  const PortSecurity security = GetPortSecurity(port);
  absl::StatusOr<common::ClientConnection> connection =
      common::ClientConnection::Connect("127.0.0.1", static_cast<uint16_t>(port),
                                        {.enabled = security.tls, .ca_file = security.ca_file}, 30);
  if (!connection.ok()) return "";
  // As an authenticated client: the port's token goes in after the request line.
  const size_t line_end = bytes.find("\r\n");
  if (add_token && !security.token.empty() && line_end != std::string::npos) {
    connection->Send(std::string_view(bytes).substr(0, line_end + 2));
    connection->Send("Authorization: Bearer " + security.token + "\r\n");
    connection->Send(std::string_view(bytes).substr(line_end + 2));
  } else {
    connection->Send(bytes);
  }
  connection->FinishSending();
  return connection->ReceiveAll();
}

// The kernel's range for ephemeral ports, [low, high]; Linux's default when it cannot be read.
std::pair<int, int> EphemeralPortRange() {
  std::ifstream file("/proc/sys/net/ipv4/ip_local_port_range");
  std::string low, high;
  if (file >> low >> high) {
    const absl::StatusOr<int64_t> l = common::ParseInt(low), h = common::ParseInt(high);
    if (l.ok() && h.ok() && *l <= *h) return {static_cast<int>(*l), static_cast<int>(*h)};
  }
  return {32768, 60999};
}

bool CanBindLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return bound;
}

// A port from bind(0) would be an ephemeral one: until the daemon listens on it, any outgoing
// connection on the machine may be given it as its local port (a replica dialling a peer that
// does not listen yet can even connect to itself on it), and the daemon then fails with
// "Address already in use" (ShardTest failed so, once in ten loaded runs). Ports outside the
// ephemeral range are only ever taken by an explicit bind.
class PortPicker {
 public:
  int Pick() {
    const auto [low, high] = EphemeralPortRange();
    // Candidates: [10000, low) and (high, 65535], whichever exist.
    const int below = std::max(0, low - 10000), above = std::max(0, 65535 - high);
    absl::MutexLock lock(&mu_);
    for (int attempt = 0; below + above > 0 && attempt < 1000; ++attempt) {
      const int k = std::uniform_int_distribution<int>(0, below + above - 1)(random_);
      const int port = k < below ? 10000 + k : high + 1 + (k - below);
      if (!handed_out_.contains(port) && CanBindLoopback(port)) {
        handed_out_.insert(port);
        return port;
      }
    }
    ADD_FAILURE() << "no free loopback port outside the ephemeral range " << low << "-" << high;
    return 0;
  }

 private:
  absl::Mutex mu_;
  std::mt19937 random_ ABSL_GUARDED_BY(mu_){std::random_device{}()};
  std::set<int> handed_out_ ABSL_GUARDED_BY(mu_);  // never twice in one test process
};

}  // namespace

int FreePort() {
  static auto* picker = new PortPicker();
  return picker->Pick();
}

std::string RawExchange(int port, const std::string& bytes) {
  return Exchange(port, bytes, /*add_token=*/true);
}

HttpResult HttpCall(int port, const std::string& method, const std::string& target,
                    const std::string& body, const std::string& content_type) {
  return HttpCallWithToken(port, GetPortSecurity(port).token, method, target, body, content_type);
}

HttpResult HttpCallWithToken(int port, const std::string& token, const std::string& method,
                             const std::string& target, const std::string& body,
                             const std::string& content_type,
                             const std::vector<std::pair<std::string, std::string>>& headers) {
  std::ostringstream request;
  request << method << " " << target << " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!token.empty()) request << "Authorization: Bearer " << token << "\r\n";
  if (!content_type.empty()) request << "Content-Type: " << content_type << "\r\n";
  for (const auto& [name, value] : headers) request << name << ": " << value << "\r\n";
  if (!body.empty() || method == "POST") request << "Content-Length: " << body.size() << "\r\n";
  request << "\r\n" << body;
  const std::string raw = Exchange(port, request.str(), /*add_token=*/false);
  HttpResult result;
  const size_t header_end = raw.find("\r\n\r\n");
  if (raw.size() < 12 || header_end == std::string::npos) return result;
  result.status = static_cast<int>(common::ParseInt(raw.substr(9, 3)).value());
  std::istringstream lines(raw.substr(0, header_end));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ')) value.erase(0, 1);
    while (!value.empty() && (value.back() == '\r')) value.pop_back();
    result.headers[name] = value;
  }
  result.body = raw.substr(header_end + 4);
  if (result.headers["transfer-encoding"] == "chunked") {
    std::string body;
    result.complete = http::DecodeChunkedBody(result.body, &body);
    result.body = std::move(body);
  }
  return result;
}

Daemon::Daemon(const std::string& binary, const std::vector<std::string>& args,
               const std::string& log_path)
    : log_path_(log_path) {
  pid_ = fork();
  if (pid_ == 0) {
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(binary.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
}

Daemon::~Daemon() { Kill(); }

int Daemon::WaitForPort() {
  const std::string url = WaitForLog("listening on (https?://[^:]+:[0-9]+)");
  if (url.empty()) return -1;
  const int port = static_cast<int>(common::ParseInt(url.substr(url.rfind(':') + 1)).value());
  if (url.starts_with("https://")) {
    TestSecurity& security = TestSecurity::Get();
    SetPortSecurity(port, {.tls = true, .ca_file = security.ca(), .token = security.admin_token});
  }
  return port;
}

std::string Daemon::WaitForLog(const std::string& pattern, int timeout_ms) {
  const std::regex wanted(pattern);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms) * TimeScale();
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch m;
    const std::string log = Log();
    if (std::regex_search(log, m, wanted))
      return m.size() > 1 ? std::string(m[1]) : std::string(m[0]);
    int status = 0;
    if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      // It may have written the line just before it exited.
      const std::string last = Log();
      if (std::regex_search(last, m, wanted))
        return m.size() > 1 ? std::string(m[1]) : std::string(m[0]);
      return "";
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(20));  // polling the log; not a timing assertion
  }
  return "";
}

std::string Daemon::Log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void Daemon::Signal(int signal_number) {
  if (pid_ > 0) kill(pid_, signal_number);
}

int Daemon::WaitForExit(int timeout_ms) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms) * TimeScale();
  while (pid_ > 0 && std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      break;
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(20));  // polling waitpid; not a timing assertion
  }
  return pid_ > 0 ? -1 : exit_code_;
}

int Daemon::Terminate() {
  if (pid_ <= 0) return exit_code_;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  // A daemon that does not stop cleanly says why in its log (a sanitizer's report, say): shown
  // here, since the test that fails on the code may not print it.
  if (code != 0) {
    const std::string log = Log();
    std::fprintf(stderr, "daemon %s exited %d on SIGTERM; the end of its log:\n%s\n",
                 log_path_.c_str(), code,
                 log.substr(log.size() > 8000 ? log.size() - 8000 : 0).c_str());
  }
  return code;
}

void Daemon::Kill() {
  if (pid_ <= 0) return;
  int status = 0;
  // A daemon that already exited by itself did so for a reason (a sanitizer's report, say): its
  // log is shown, since the test may not have looked.
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code != 0) {
      const std::string log = Log();
      std::fprintf(stderr, "daemon %s had exited with %d; the end of its log:\n%s\n",
                   log_path_.c_str(), code,
                   log.substr(log.size() > 8000 ? log.size() - 8000 : 0).c_str());
    }
    return;
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

}  // namespace podscope::testing
