#include "tests/integration/daemon.h"

#include "coordinator/http/http_types.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace podscope::testing {
namespace {

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  timeval timeout{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  return fd;
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

}  // namespace

std::string RawExchange(int port, const std::string& bytes) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + sent, bytes.size() - sent);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  std::string out = ReadAll(fd);
  close(fd);
  return out;
}

HttpResult HttpCall(int port, const std::string& method, const std::string& target, const std::string& body,
                    const std::string& content_type) {
  std::ostringstream request;
  request << method << " " << target << " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!content_type.empty()) request << "Content-Type: " << content_type << "\r\n";
  if (!body.empty() || method == "POST") request << "Content-Length: " << body.size() << "\r\n";
  request << "\r\n" << body;
  const std::string raw = RawExchange(port, request.str());
  HttpResult result;
  const size_t header_end = raw.find("\r\n\r\n");
  if (raw.size() < 12 || header_end == std::string::npos) return result;
  result.status = std::stoi(raw.substr(9, 3));
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
    result.complete = coordinator::DecodeChunkedBody(result.body, &body);
    result.body = std::move(body);
  }
  return result;
}

Daemon::Daemon(const std::string& binary, const std::vector<std::string>& args, const std::string& log_path)
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
  const std::string port = WaitForLog("listening on http://[^:]+:([0-9]+)");
  return port.empty() ? -1 : std::stoi(port);
}

std::string Daemon::WaitForLog(const std::string& pattern, int timeout_ms) {
  const std::regex wanted(pattern);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch m;
    const std::string log = Log();
    if (std::regex_search(log, m, wanted)) return m.size() > 1 ? std::string(m[1]) : std::string(m[0]);
    int status = 0;
    if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      // It may have written the line just before it exited.
      const std::string last = Log();
      if (std::regex_search(last, m, wanted)) return m.size() > 1 ? std::string(m[1]) : std::string(m[0]);
      return "";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
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
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (pid_ > 0 && std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pid_ > 0 ? -1 : exit_code_;
}

int Daemon::Terminate() {
  if (pid_ <= 0) return exit_code_;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void Daemon::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

}  // namespace podscope::testing
