#include "coordinator/coordinator_flags.h"

#include <unistd.h>

#include <iostream>

#include "common/status_format.h"
#include "common/status_macros.h"
#include "coordinator/auth/token_store.h"
#include "podscope/version.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator {

void AddCoordinatorFlags(CLI::App& app, CoordinatorFlags& c) {
  app.set_version_flag("--version", std::string("podscope-coordinator ") + kVersion);
  app.add_option("--config", c.config_path,
                 "JSON config file (listen addresses, data dir, limits, retention)");
  app.add_option("--http", c.http,
                 "REST listen address HOST:PORT (port 0: any free port) [127.0.0.1:8080]");
  app.add_option("--grpc", c.grpc,
                 "agent gRPC listen address HOST:PORT (port 0: any free port) [127.0.0.1:50051]");
  app.add_option("--data-dir", c.data_dir, "RocksDB store directory [podscope-data]");
  app.add_option("--tls-cert", c.tls.cert,
                 "this coordinator's certificate chain, PEM (HTTPS and the agents' port)");
  app.add_option("--tls-key", c.tls.key, "its private key, PEM");
  app.add_option("--tls-ca", c.tls.ca, "the CA agents' certificates must chain to, PEM");
  app.add_flag("--insecure", c.insecure,
               "plaintext HTTP and gRPC, no client certificates: only on a network you trust (logs "
               "a warning)");
  app.add_option("--auth-tokens", c.auth_tokens,
                 "the REST API's token file (lines from hash-token; reloaded on SIGHUP)");
  app.add_option(
      "--shard-name", c.shard_name,
      "this replica's name among the shards (shards.members_file); in Kubernetes, its pod's name");
  app.add_flag("--check-config", c.check_config,
               "check the config file, flags, token file and TLS files, print \"config OK\" and "
               "exit (0 if good, 2 if not)");
  c.hash_token = app.add_subcommand(
      "hash-token", "read a bearer token on stdin and print its line for the --auth-tokens file");
  c.hash_token->add_option("--role", c.hash_role, "read, capture or admin")->required();
  c.hash_token
      ->add_option("--name", c.hash_name, "who holds the token (shown in logs, never the token)")
      ->required();
}

absl::StatusOr<CoordinatorSettings> LoadCoordinatorSettings(const CoordinatorFlags& c) {
  CoordinatorSettings settings;
  if (!c.config_path.empty()) RETURN_IF_ERROR(LoadCoordinatorConfig(c.config_path, &settings));
  if (!c.http.empty()) settings.http = c.http;
  if (!c.grpc.empty()) settings.grpc = c.grpc;
  if (!c.data_dir.empty()) settings.data_dir = c.data_dir;
  if (!c.auth_tokens.empty()) settings.auth_tokens = c.auth_tokens;
  if (!c.shard_name.empty()) settings.shards.self = c.shard_name;
  if (!c.tls.cert.empty()) settings.tls.cert = c.tls.cert;
  if (!c.tls.key.empty()) settings.tls.key = c.tls.key;
  if (!c.tls.ca.empty()) settings.tls.ca = c.tls.ca;
  settings.insecure = settings.insecure || c.insecure;
  RETURN_IF_ERROR(common::CheckTlsChoice(settings.tls, settings.insecure, "podscope-coordinator"));
  DeriveCoordinatorSettings(&settings);
  return settings;
}

int RunHashToken(const std::string& role_text, const std::string& name) {
  std::string token;
  if (isatty(STDIN_FILENO))
    std::cerr << "token to hash (the line printed holds only its salted hash): " << std::flush;
  std::getline(std::cin, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == '\n')) token.pop_back();
  absl::StatusOr<http::Access> role = ParseRole(role_text);
  if (!role.ok()) {
    spdlog::error("--role: {}", role.status());
    return 2;
  }
  absl::StatusOr<std::string> line = HashTokenLine(name, *role, token);
  if (!line.ok()) {
    spdlog::error("{}", line.status());
    return 2;
  }
  std::cout << *line << "\n";
  return 0;
}

}  // namespace podscope::coordinator
