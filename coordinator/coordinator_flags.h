// The coordinator's command line: flags over the config file's keys, and the hash-token
// subcommand that writes the token file's lines.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "common/tls_files.h"
#include "coordinator/coordinator_config.h"

namespace podscope::coordinator {

struct CoordinatorFlags {
  std::string config_path, http, grpc, data_dir, auth_tokens, shard_name;
  common::TlsFiles tls;
  bool insecure = false;
  bool check_config = false;
  CLI::App* hash_token = nullptr;  // the subcommand; parsed() once given
  std::string hash_role, hash_name;
};

void AddCoordinatorFlags(CLI::App& app, CoordinatorFlags& flags);

// The config file (when given), the flags over it, the TLS choice checked (its files read and
// parsed), and the values derived from them (DeriveCoordinatorSettings). Errors are the
// config's or the command line's.
absl::StatusOr<CoordinatorSettings> LoadCoordinatorSettings(const CoordinatorFlags& flags);

// `podscope-coordinator hash-token --role ROLE --name NAME`: reads a token on stdin and prints
// its line for the token file. The token itself is never printed nor stored. Returns the exit
// code: 0, or 2 for a bad role or name.
int RunHashToken(const std::string& role, const std::string& name);

}  // namespace podscope::coordinator
