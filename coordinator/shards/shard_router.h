// Any replica answers every REST call for any job (docs/deploy.md): a call about a job another
// replica owns goes to that replica, a call about a capture or schedule goes to the replica
// that holds it, and a list is gathered from every replica. The routes' own handlers stay
// unaware of shards: ShardRouter wraps them once they are registered.
//
// A call goes on to a peer as a proxy (the default: it works wherever the client reached the
// Service) or as a 307 redirect to the peer's REST URL (the CLI follows it). The client's own
// Authorization travels with it, and the peer checks it again: a forwarded call is worth exactly
// what the client sent. A forwarded call carries X-Podscope-Shard-Forwarded and is always
// answered where it lands, so that two replicas with different member lists (during a
// rollout) cannot bounce a call between them.
//
// A slow or hung peer holds up little: what this replica can answer itself is answered on the
// I/O threads, never behind a forward; an id that carries its maker's tag is looked for on that
// shard only; finding an id and gathering lists have lookup_timeout_ms in all; each peer gets at
// most max_calls_per_peer calls at once; and a peer that failed to answer is not asked again
// for peer_retry_after_ms (its calls fail at once, saying why).
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/time_source.h"
#include "coordinator/shards/shard_membership.h"
#include "http/http_client.h"
#include "http/http_types.h"

namespace podscope::coordinator {

inline constexpr const char* kShardForwardedHeader = "x-podscope-shard-forwarded";

enum class ShardPolicy {
  kJobInBody,   // the owner of the body's "job" (POST /v1/captures, /v1/schedules)
  kJobInPath,   // the owner of the {job} path parameter
  kFindHolder,  // this replica if it knows the {id}, else the peer that does
  kGather,      // every replica's list, merged
  kBroadcast,   // applied here, then on every peer (alert rules)
};

// How the merged list of a kGather route is made.
enum class GatherKind { kCaptures, kWorkers, kAlerts, kSchedules };

struct ShardRouteRule {
  std::string method, pattern;
  ShardPolicy policy;
  // kFindHolder: the GET that tells whether a replica holds {id} ("/v1/captures/").
  std::string locate_prefix;
  GatherKind gather = GatherKind::kCaptures;
};

class ShardRouter {
 public:
  // `ca_file`: the CA the peers' certificates chain to (empty: plaintext peers or the system's).
  ShardRouter(ShardMembership& membership, std::string ca_file,
              const common::TimeSource& time = common::RealTime());

  // The rules for podscope's REST API (docs/gpu-efficiency.md). Routes not named are answered
  // locally: health, metrics, the OpenAPI document, imports (stored where they are uploaded).
  static std::vector<ShardRouteRule> ApiRules();
  // Wraps the routes `rules` names; call once every route is registered. Returns the rules
  // that matched no route (a mismatch between the rules and the API is a bug to report).
  std::vector<ShardRouteRule> Install(http::Router& router,
                                      const std::vector<ShardRouteRule>& rules);

  // Prometheus text: podscope_shard_forwarded_total{policy}, podscope_shard_peer_errors_total,
  // podscope_shard_peer_calls_refused_total{reason}.
  void AppendMetrics(std::string* out) const;

  // How long a call to a peer may take: the whole exchange for a lookup, else per read.
  enum class CallKind { kLookup, kProxy };
  // Calls `to` (any thread), within its limits; an error without calling when it has
  // max_calls_per_peer calls in flight, or failed to answer less than peer_retry_after_ms ago.
  absl::StatusOr<http::HttpClientResponse> Call(const ShardMember& to, const std::string& method,
                                                const std::string& target,
                                                const http::HttpRequest& r, const std::string& body,
                                                CallKind kind);

 private:
  http::HttpResponse Handle(const ShardRouteRule& rule, const http::HttpHandler& local,
                            http::HttpRequest& r);
  // The answer when this replica needs no peer for `r`; nullopt otherwise.
  std::optional<http::HttpResponse> AnswerHere(const ShardRouteRule& rule,
                                               const http::HttpHandler& local,
                                               http::HttpRequest& r);
  // Sends `r` on to `to`: a proxied answer, or a redirect.
  http::HttpResponse Forward(const ShardMember& to, const http::HttpRequest& r,
                             std::string_view why);
  http::HttpResponse FindHolder(const ShardRouteRule& rule, const http::HttpHandler& local,
                                http::HttpRequest& r);
  http::HttpResponse Gather(const ShardRouteRule& rule, const http::HttpHandler& local,
                            http::HttpRequest& r);
  http::HttpResponse Broadcast(const http::HttpHandler& local, http::HttpRequest& r);
  void RememberHolder(const std::string& id, const std::string& member);
  std::string KnownHolder(const std::string& id);

  struct PeerState {
    int in_flight = 0;
    common::TimeNs quiet_until = 0;  // not asked before this (it failed to answer)
    std::string failure;             // why, for the calls refused meanwhile
  };

  ShardMembership& membership_;
  const std::string ca_file_;
  const common::TimeSource& time_;
  mutable absl::Mutex mu_;
  std::map<std::string, PeerState> peers_ ABSL_GUARDED_BY(mu_);  // by member name
  uint64_t refused_busy_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refused_quiet_ ABSL_GUARDED_BY(mu_) = 0;
  // Which peer holds an id (oldest evicted first, at most 4096): a hint, checked on every use.
  std::map<std::string, std::string> holders_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> holder_order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> forwarded_ ABSL_GUARDED_BY(mu_);  // by policy
  uint64_t peer_errors_ ABSL_GUARDED_BY(mu_) = 0;
};

// The request target (path and query, percent-encoded) of `r`, as a peer is sent it.
std::string RequestTarget(const http::HttpRequest& r);

// One page of a list paged by `id_key` after a cursor (`cursor_key`), gathered from every
// replica's answer: the union of their pages is complete only up to the smallest cursor any
// replica gave (each stopped at its limit), and holds at most `limit` items, in id order, each
// once (a connected agent's entry over a disconnected one's). Returns the merged cursor, empty
// at the end of the list.
std::string MergePage(std::vector<boost::json::object>& answers, std::string_view list_key,
                      std::string_view id_key, std::string_view cursor_key, size_t limit,
                      boost::json::array* merged);

}  // namespace podscope::coordinator
