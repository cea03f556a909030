// A real browser for the web UI's tests: Debian's headless Chromium driven by chromedriver over
// the W3C WebDriver protocol (plain HTTP + JSON, spoken here with the tests' HTTP client).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "boost/json.hpp"
#include "tests/integration/daemon.h"
#include "tests/test_paths.h"

namespace podscope::testing {

inline constexpr char kChromiumPath[] = "/usr/bin/chromium";
inline constexpr char kChromedriverPath[] = "/usr/bin/chromedriver";

struct BrowserOptions {
  int width = 1280;
  int height = 800;
  // Certificates whose public key (SPKI SHA-256, base64) Chromium accepts without a known CA: the
  // test coordinator's own, so that HTTPS is checked against exactly that key.
  std::vector<std::string> trusted_spki;
};

class Browser {
 public:
  // Starts chromedriver and one headless Chromium session. FailedPrecondition naming the
  // package when chromium or chromedriver is not installed.
  static absl::StatusOr<std::unique_ptr<Browser>> Start(const BrowserOptions& options);
  ~Browser();

  absl::Status Navigate(const std::string& url);
  // Runs `script` (a function body: "return document.title") in the page; its JSON result.
  absl::StatusOr<boost::json::value> Run(const std::string& script, boost::json::array args = {});
  // Polls `expression` (JavaScript) until it is truthy; false after `timeout_ms`.
  bool WaitFor(const std::string& expression, int timeout_ms);
  // The element matching a CSS selector (its WebDriver id), and what can be done to it.
  absl::StatusOr<std::string> Find(const std::string& css);
  absl::Status Click(const std::string& element);
  absl::Status Type(const std::string& element,
                    const std::string& text);  // keys: "\uE014" is ArrowRight
  absl::Status Clear(const std::string& element);
  absl::Status SetWindowSize(int width, int height);
  // Writes a PNG of the viewport.
  absl::Status Screenshot(const std::string& path);
  // The console's messages since the last call, "LEVEL message" (chromedriver's browser log).
  absl::StatusOr<std::vector<std::string>> ConsoleLog();
  // Severe ones only: errors, failed loads, uncaught exceptions, CSP refusals.
  std::vector<std::string> ConsoleErrors();

 private:
  Browser() = default;
  absl::StatusOr<boost::json::value> Call(const std::string& method, const std::string& path,
                                          const boost::json::value& body);

  ScratchDir dir_;
  std::unique_ptr<Daemon> driver_;
  int port_ = 0;
  std::string session_;
};

// The SPKI SHA-256 (base64) of a PEM certificate, as Chromium's
// --ignore-certificate-errors-spki-list takes it (computed with openssl).
absl::StatusOr<std::string> SpkiHash(const std::string& cert_pem_path);

}  // namespace podscope::testing
