#include "tests/integration/browser.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "absl/strings/escaping.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "http/http_client.h"
#include "tests/wait_for.h"

namespace podscope::testing {
namespace {

namespace json = boost::json;

// The W3C element reference key.
constexpr char kElementKey[] = "element-6066-11e4-a52e-4f735466cecf";

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

absl::StatusOr<std::string> SpkiHash(const std::string& cert_pem_path) {
  const std::string command =
      "openssl x509 -in '" + cert_pem_path +
      "' -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | "
      "openssl base64 -A";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError("cannot run openssl");
  std::string out;
  char buf[256];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  if (pclose(pipe) != 0 || Trim(out).size() != 44) {
    return absl::InternalError(
        common::StrCat("openssl could not hash the key of ", cert_pem_path, ": ", out));
  }
  return Trim(out);
}

absl::StatusOr<std::unique_ptr<Browser>> Browser::Start(const BrowserOptions& options) {
  for (const char* path : {kChromiumPath, kChromedriverPath}) {
    if (access(path, X_OK) != 0) {
      return absl::FailedPreconditionError(
          common::StrCat(path,
                         " is missing: install Debian's chromium and chromium-driver "
                         "(scripts/test.sh installs them)"));
    }
  }
  std::unique_ptr<Browser> browser(new Browser());
  browser->port_ = FreePort();
  browser->driver_ = std::make_unique<Daemon>(
      kChromedriverPath, std::vector<std::string>{"--port=" + std::to_string(browser->port_)},
      browser->dir_.File("chromedriver.log"));
  if (browser->driver_->WaitForLog("(started successfully)", 30'000).empty()) {
    return absl::UnavailableError("chromedriver did not start: " + browser->driver_->Log());
  }
  json::array args = {
      "--headless=new",
      "--disable-gpu",
      "--no-first-run",
      "--disable-extensions",
      "--disable-dev-shm-usage",
      "--user-data-dir=" + browser->dir_.File("profile"),
      "--window-size=" + std::to_string(options.width) + "," + std::to_string(options.height)};
  // Chromium's sandbox needs user namespaces, which a root user in a container lacks.
  if (geteuid() == 0) args.push_back("--no-sandbox");
  std::string spki;
  for (const std::string& s : options.trusted_spki) spki += (spki.empty() ? "" : ",") + s;
  if (!spki.empty()) args.push_back(json::string("--ignore-certificate-errors-spki-list=" + spki));
  json::object chrome_options = {{"binary", kChromiumPath}, {"args", args}};
  json::object capabilities = {{"browserName", "chrome"},
                               {"goog:chromeOptions", chrome_options},
                               {"goog:loggingPrefs", json::object{{"browser", "ALL"}}}};
  json::object request = {{"capabilities", json::object{{"alwaysMatch", capabilities}}}};
  ASSIGN_OR_RETURN(json::value session, browser->Call("POST", "/session", request));
  const json::value* id = session.as_object().if_contains("sessionId");
  if (id == nullptr || !id->is_string())
    return absl::InternalError("chromedriver gave no session: " + json::serialize(session));
  browser->session_ = std::string(id->as_string());
  return browser;
}

Browser::~Browser() {
  if (!session_.empty()) (void)Call("DELETE", "/session/" + session_, nullptr);
  if (driver_) driver_->Terminate();
}

absl::StatusOr<json::value> Browser::Call(const std::string& method, const std::string& path,
                                          const json::value& body) {
  // Not HttpCall: it half-closes after the request, and chromedriver drops a client it sees leave.
  absl::StatusOr<http::HttpClientResponse> answer = http::HttpRequestTo(
      {.host = "127.0.0.1", .port = static_cast<uint16_t>(port_), .timeout_seconds = 300}, method,
      path, body.is_null() ? "" : json::serialize(body), body.is_null() ? "" : "application/json");
  if (!answer.ok()) {
    return absl::UnavailableError(common::StrCat("chromedriver did not answer ", method, " ", path,
                                                 ": ", answer.status().ToString()));
  }
  const http::HttpClientResponse& r = *answer;
  boost::system::error_code ec;
  json::value parsed = json::parse(r.body, ec);
  if (ec || !parsed.is_object())
    return absl::InternalError(common::StrCat("chromedriver: ", r.status, " ", r.body));
  const json::value* value = parsed.as_object().if_contains("value");
  if (r.status != 200) {
    return absl::InternalError(common::StrCat(method, " ", path, ": ", r.status, " ",
                                              value ? json::serialize(*value) : r.body));
  }
  if (path == "/session") return value ? *value : parsed;
  return value ? *value : json::value(nullptr);
}

absl::Status Browser::Navigate(const std::string& url) {
  return Call("POST", "/session/" + session_ + "/url", json::object{{"url", url}}).status();
}

absl::StatusOr<json::value> Browser::Run(const std::string& script, json::array args) {
  return Call("POST", "/session/" + session_ + "/execute/sync",
              json::object{{"script", script}, {"args", args}});
}

bool Browser::WaitFor(const std::string& expression, int timeout_ms) {
  return testing::WaitFor(
      [&] {
        absl::StatusOr<json::value> v =
            Run("try { return !!(" + expression + "); } catch (e) { return false; }");
        return v.ok() && v->is_bool() && v->as_bool();
      },
      std::chrono::milliseconds(timeout_ms), std::chrono::milliseconds(100));
}

absl::StatusOr<std::string> Browser::Find(const std::string& css) {
  ASSIGN_OR_RETURN(json::value v, Call("POST", "/session/" + session_ + "/element",
                                       json::object{{"using", "css selector"}, {"value", css}}));
  const json::value* id = v.is_object() ? v.as_object().if_contains(kElementKey) : nullptr;
  if (id == nullptr || !id->is_string()) return absl::NotFoundError("no element " + css);
  return std::string(id->as_string());
}

absl::Status Browser::Click(const std::string& element) {
  return Call("POST", "/session/" + session_ + "/element/" + element + "/click", json::object{})
      .status();
}

absl::Status Browser::Type(const std::string& element, const std::string& text) {
  return Call("POST", "/session/" + session_ + "/element/" + element + "/value",
              json::object{{"text", text}})
      .status();
}

absl::Status Browser::Clear(const std::string& element) {
  return Call("POST", "/session/" + session_ + "/element/" + element + "/clear", json::object{})
      .status();
}

absl::Status Browser::SetWindowSize(int width, int height) {
  return Call("POST", "/session/" + session_ + "/window/rect",
              json::object{{"width", width}, {"height", height}})
      .status();
}

absl::Status Browser::Screenshot(const std::string& path) {
  ASSIGN_OR_RETURN(json::value v, Call("GET", "/session/" + session_ + "/screenshot", nullptr));
  if (!v.is_string()) return absl::InternalError("no screenshot");
  std::string png;
  if (!absl::Base64Unescape(std::string(v.as_string()), &png))
    return absl::InternalError("screenshot is not base64");
  std::ofstream out(path, std::ios::binary);
  out << png;
  return out ? absl::OkStatus() : absl::InternalError("cannot write " + path);
}

absl::StatusOr<std::vector<std::string>> Browser::ConsoleLog() {
  ASSIGN_OR_RETURN(json::value v, Call("POST", "/session/" + session_ + "/se/log",
                                       json::object{{"type", "browser"}}));
  std::vector<std::string> out;
  if (!v.is_array()) return out;
  for (const json::value& entry : v.as_array()) {
    const json::object& e = entry.as_object();
    out.push_back(
        common::StrCat(e.contains("level") ? std::string(e.at("level").as_string()) : "", " ",
                       e.contains("message") ? std::string(e.at("message").as_string()) : ""));
  }
  return out;
}

std::vector<std::string> Browser::ConsoleErrors() {
  std::vector<std::string> errors;
  absl::StatusOr<std::vector<std::string>> log = ConsoleLog();
  if (!log.ok()) return {"cannot read the console: " + log.status().ToString()};
  for (const std::string& line : *log) {
    if (line.rfind("SEVERE", 0) == 0) errors.push_back(line);
  }
  return errors;
}

}  // namespace podscope::testing
