// The shard members a coordinator works with, from its members file (a Kubernetes ConfigMap the
// Helm chart renders from the StatefulSet's replica count). The file is re-read every
// reload_interval: scaling the StatefulSet changes it, and every replica moves to the new map
// without a restart. A file that turns bad is logged and the last good map stays.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/shards/shard_map.h"

namespace podscope::coordinator {

struct ShardOptions {
  std::string self;          // this replica's member name (--shard-name; the pod's name)
  std::string members_file;  // empty: not sharded, this coordinator owns every job
  int64_t reload_interval_ms = 5'000;
  // A REST call another replica must answer: proxied (false), or redirected (true) to the
  // owner's `rest` URL for the client to follow.
  bool redirect = false;
  int64_t max_proxy_bytes = int64_t{256} << 20;  // a proxied answer larger than this is a 502
  int64_t peer_timeout_ms = 30'000;  // connecting to a peer, and each read without progress
  // Finding the shard that holds an id and gathering lists, which a healthy peer answers in
  // milliseconds: the whole exchange. (A proxied call, an analysis say, has peer_timeout_ms.)
  int64_t lookup_timeout_ms = 3'000;
  // Calls in flight to one peer at once; more fail at once (a hung peer holds this many of the
  // forwarding threads at most).
  int max_calls_per_peer = 4;
  // After a peer failed to answer, calls to it fail at once for this long.
  int64_t peer_retry_after_ms = 5'000;
};

class ShardMembership {
 public:
  using Listener = std::function<void(const ShardMap& before, const ShardMap& after)>;

  // Reads the members file once (an error if it is missing or bad, or lacks `self`); without a
  // file, a single-member map.
  static absl::StatusOr<std::unique_ptr<ShardMembership>> Open(ShardOptions options);
  ~ShardMembership();

  std::shared_ptr<const ShardMap> current() const;
  const ShardOptions& options() const { return options_; }
  // Re-reads the file: true when the members changed (listeners have run), false when not; an
  // error (the map in force stays) when the file is unreadable or bad.
  absl::StatusOr<bool> Reload();
  // Called, in order, after every change. Register before StartWatching.
  void OnChange(Listener listener);
  // Re-reads every reload_interval_ms on a thread of its own, until StopWatching (or the
  // destructor). Stop before anything the listeners use goes away.
  void StartWatching();
  void StopWatching();

 private:
  explicit ShardMembership(ShardOptions options, std::shared_ptr<const ShardMap> map)
      : options_(std::move(options)), map_(std::move(map)) {}

  const ShardOptions options_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const ShardMap> map_ ABSL_GUARDED_BY(mu_);
  std::vector<Listener> listeners_;  // set before watching starts
  absl::Mutex reload_mu_;            // one reload at a time, so listeners see changes in order
  absl::Mutex stop_mu_;
  bool stopping_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread watcher_;
};

}  // namespace podscope::coordinator
