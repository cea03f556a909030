#include "coordinator/shards/shard_router.h"

#include <algorithm>
#include <boost/json.hpp>
#include <set>

#include "common/json_text.h"
#include "common/parse_number.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator {
namespace {

constexpr size_t kMaxRememberedHolders = 4096;

std::string EncodePath(std::string_view path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/' || c == ':') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

http::HttpResponse FromPeer(const http::HttpClientResponse& answer, const ShardMember& peer) {
  http::HttpResponse out;
  out.status = answer.status;
  const auto type = answer.headers.find("content-type");
  out.content_type = type == answer.headers.end() ? "application/json" : type->second;
  out.body = answer.body;
  for (const char* header :
       {"location", "content-disposition", "retry-after", "www-authenticate"}) {
    if (const auto it = answer.headers.find(header); it != answer.headers.end())
      out.headers.emplace_back(header, it->second);
  }
  out.headers.emplace_back("X-Podscope-Shard", peer.name);
  return out;
}

// The "job" of a JSON body; empty when there is none (the local handler then explains why).
std::string JobOfBody(std::string_view body) {
  boost::system::error_code ec;
  boost::json::parse_options options;
  options.max_depth = 8;
  const boost::json::value v = boost::json::parse(body, ec, {}, options);
  if (ec || !v.is_object()) return "";
  const boost::json::value* job = v.get_object().if_contains("job");
  return job != nullptr && job->is_string() ? std::string(job->get_string()) : "";
}

// Parses a JSON object answer; null when it is not one.
std::optional<boost::json::object> ParseObject(std::string_view body) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return std::nullopt;
  return std::move(v.get_object());
}

std::string StringField(const boost::json::value& v, std::string_view key) {
  if (!v.is_object()) return "";
  const boost::json::value* f = v.get_object().if_contains(key);
  return f != nullptr && f->is_string() ? std::string(f->get_string()) : "";
}

int64_t IntField(const boost::json::object& o, std::string_view key) {
  const boost::json::value* f = o.if_contains(key);
  return f != nullptr && f->is_int64()    ? f->get_int64()
         : f != nullptr && f->is_uint64() ? static_cast<int64_t>(f->get_uint64())
                                          : 0;
}

}  // namespace

std::string MergePage(std::vector<boost::json::object>& answers, std::string_view list_key,
                      std::string_view id_key, std::string_view cursor_key, size_t limit,
                      boost::json::array* merged) {
  std::optional<std::string> bound;
  for (const boost::json::object& a : answers) {
    const boost::json::value* cursor = a.if_contains(cursor_key);
    if (cursor != nullptr && cursor->is_string()) {
      const std::string c(cursor->get_string());
      if (!bound || c < *bound) bound = c;
    }
  }
  std::vector<boost::json::value> items;
  for (boost::json::object& a : answers) {
    boost::json::value* list = a.if_contains(list_key);
    if (list == nullptr || !list->is_array()) continue;
    for (boost::json::value& item : list->get_array()) items.push_back(std::move(item));
  }
  std::stable_sort(items.begin(), items.end(),
                   [&](const boost::json::value& x, const boost::json::value& y) {
                     return StringField(x, id_key) < StringField(y, id_key);
                   });
  std::string next;
  for (boost::json::value& item : items) {
    const std::string id = StringField(item, id_key);
    if (bound && id > *bound) {
      next = *bound;
      break;
    }
    // A duplicate first: the page may be full, and the entry it holds may be the stale one.
    if (!merged->empty() && StringField(merged->back(), id_key) == id) {
      // The same item from two replicas: an agent that left a replica is listed there as
      // disconnected until forgotten, and connected where it went.
      if (StringField(merged->back(), "health") == "disconnected" &&
          StringField(item, "health") != "disconnected") {
        merged->back() = std::move(item);
      }
      continue;
    }
    if (merged->size() == limit) {
      next = StringField(merged->back(), id_key);
      break;
    }
    merged->push_back(std::move(item));
  }
  if (next.empty() && bound && !merged->empty()) next = *bound;
  return next;
}

std::string RequestTarget(const http::HttpRequest& r) {
  std::string target = EncodePath(r.path);
  char separator = '?';
  for (const auto& [key, value] : r.query) {
    common::StrAppend(&target, std::string(1, separator), http::UrlEncode(key), "=",
                      http::UrlEncode(value));
    separator = '&';
  }
  return target;
}

ShardRouter::ShardRouter(ShardMembership& membership, std::string ca_file,
                         const common::TimeSource& time)
    : membership_(membership), ca_file_(std::move(ca_file)), time_(time) {}

std::vector<ShardRouteRule> ShardRouter::ApiRules() {
  return {
      {"POST", "/v1/captures", ShardPolicy::kJobInBody},
      {"GET", "/v1/captures", ShardPolicy::kGather, "", GatherKind::kCaptures},
      {"GET", "/v1/captures/{id}", ShardPolicy::kFindHolder, "/v1/captures/"},
      {"DELETE", "/v1/captures/{id}", ShardPolicy::kFindHolder, "/v1/captures/"},
      {"POST", "/v1/captures/{id}:cancel", ShardPolicy::kFindHolder, "/v1/captures/"},
      {"GET", "/v1/captures/{id}/trace", ShardPolicy::kFindHolder, "/v1/captures/"},
      {"GET", "/v1/captures/{id}/{report}", ShardPolicy::kFindHolder, "/v1/captures/"},
      {"GET", "/v1/workers", ShardPolicy::kGather, "", GatherKind::kWorkers},
      {"GET", "/v1/alerts", ShardPolicy::kGather, "", GatherKind::kAlerts},
      {"PUT", "/v1/alerts/rules", ShardPolicy::kBroadcast},
      {"GET", "/v1/watch/jobs/{job}", ShardPolicy::kJobInPath},
      {"POST", "/v1/schedules", ShardPolicy::kJobInBody},
      {"GET", "/v1/schedules", ShardPolicy::kGather, "", GatherKind::kSchedules},
      {"GET", "/v1/schedules/{id}", ShardPolicy::kFindHolder, "/v1/schedules/"},
      {"DELETE", "/v1/schedules/{id}", ShardPolicy::kFindHolder, "/v1/schedules/"},
  };
}

std::vector<ShardRouteRule> ShardRouter::Install(http::Router& router,
                                                 const std::vector<ShardRouteRule>& rules) {
  std::vector<ShardRouteRule> unmatched;
  for (const ShardRouteRule& rule : rules) {
    bool found = false;
    for (http::Route& route : router.mutable_routes()) {
      if (route.method != rule.method || route.pattern != rule.pattern) continue;
      found = true;
      http::HttpHandler local = std::move(route.handler);
      route.handler = [this, rule, local](http::HttpRequest& r) { return Handle(rule, local, r); };
      // It may wait on peers: off the I/O threads (an analysis stays on the heavy pool), unless
      // this replica answers it itself.
      if (!route.heavy) {
        route.forwarded = true;
        route.local_answer = [this, rule, local](http::HttpRequest& r) {
          return AnswerHere(rule, local, r);
        };
      }
    }
    if (!found) unmatched.push_back(rule);
  }
  return unmatched;
}

http::HttpResponse ShardRouter::Handle(const ShardRouteRule& rule, const http::HttpHandler& local,
                                       http::HttpRequest& r) {
  // A heavy route (no local_answer) asks here too; a light one was answered here already.
  if (std::optional<http::HttpResponse> here = AnswerHere(rule, local, r)) return *std::move(here);
  const std::shared_ptr<const ShardMap> map = membership_.current();
  switch (rule.policy) {
    case ShardPolicy::kJobInBody:
    case ShardPolicy::kJobInPath: {
      const std::string job =
          rule.policy == ShardPolicy::kJobInBody ? JobOfBody(r.body) : r.params["job"];
      const ShardMember& owner = map->OwnerOf(job);
      return Forward(owner, r, common::StrCat("job ", job, " is owned by shard ", owner.name));
    }
    case ShardPolicy::kFindHolder:
      return FindHolder(rule, local, r);
    case ShardPolicy::kGather:
      return Gather(rule, local, r);
    case ShardPolicy::kBroadcast:
      return Broadcast(local, r);
  }
  return local(r);
}

std::optional<http::HttpResponse> ShardRouter::AnswerHere(const ShardRouteRule& rule,
                                                          const http::HttpHandler& local,
                                                          http::HttpRequest& r) {
  const std::shared_ptr<const ShardMap> map = membership_.current();
  if (!map->sharded() || !r.Header(kShardForwardedHeader).empty()) return local(r);
  switch (rule.policy) {
    case ShardPolicy::kJobInBody:
    case ShardPolicy::kJobInPath: {
      const std::string job =
          rule.policy == ShardPolicy::kJobInBody ? JobOfBody(r.body) : r.params["job"];
      if (job.empty() || map->Owns(job)) return local(r);
      return std::nullopt;
    }
    case ShardPolicy::kFindHolder: {
      http::HttpResponse here = local(r);
      const ShardMember* maker = map->MakerOf(r.params["id"]);
      if (here.status != 404 || (maker != nullptr && maker->name == map->self().name)) return here;
      return std::nullopt;
    }
    case ShardPolicy::kGather:
    case ShardPolicy::kBroadcast:
      return std::nullopt;
  }
  return std::nullopt;
}

absl::StatusOr<http::HttpClientResponse> ShardRouter::Call(const ShardMember& to,
                                                           const std::string& method,
                                                           const std::string& target,
                                                           const http::HttpRequest& r,
                                                           const std::string& body, CallKind kind) {
  ASSIGN_OR_RETURN(http::ServerAddress address, http::ParseServerUrl(to.rest));
  const ShardOptions& options = membership_.options();
  {
    absl::MutexLock lock(&mu_);
    PeerState& peer = peers_[to.name];
    const common::TimeNs now = time_.Now();
    if (now < peer.quiet_until) {
      ++refused_quiet_;
      return absl::UnavailableError(common::StrCat(
          "it did not answer lately (", peer.failure, "); not asked again for ",
          (peer.quiet_until - now + 999'999) / 1'000'000, " ms (shards.peer_retry_after_ms)"));
    }
    if (peer.in_flight >= options.max_calls_per_peer) {
      ++refused_busy_;
      return absl::UnavailableError(
          common::StrCat("it has ", peer.in_flight,
                         " calls from this shard in flight already (shards.max_calls_per_peer)"));
    }
    ++peer.in_flight;
  }
  address.ca_file = ca_file_;
  if (kind == CallKind::kLookup) {
    address.timeout_seconds =
        static_cast<int>(std::max<int64_t>(1, (options.lookup_timeout_ms + 999) / 1000));
    address.deadline_ms = static_cast<int>(options.lookup_timeout_ms);
  } else {
    address.timeout_seconds =
        static_cast<int>(std::max<int64_t>(1, options.peer_timeout_ms / 1000));
  }
  address.max_response_bytes = static_cast<size_t>(options.max_proxy_bytes) + 1;
  address.user_agent = "podscope-coordinator";
  address.headers.emplace_back("X-Podscope-Shard-Forwarded", membership_.current()->self().name);
  if (const std::string auth = r.Header("authorization"); !auth.empty())
    address.headers.emplace_back("Authorization", auth);
  const std::string type = r.Header("content-type");
  absl::StatusOr<http::HttpClientResponse> answer =
      http::HttpRequestTo(address, method, target, body, type);
  {
    absl::MutexLock lock(&mu_);
    PeerState& peer = peers_[to.name];
    --peer.in_flight;
    if (!answer.ok()) {
      peer.quiet_until = time_.Now() + options.peer_retry_after_ms * 1'000'000;
      peer.failure = std::string(answer.status().message());
    }
  }
  if (answer.ok() && answer->truncated) {
    return absl::ResourceExhaustedError(
        common::StrCat("its answer is larger than shards.max_proxy_bytes (",
                       options.max_proxy_bytes, "); fetch it from ", to.rest, " directly"));
  }
  if (!answer.ok()) {
    absl::MutexLock lock(&mu_);
    ++peer_errors_;
  }
  return answer;
}

http::HttpResponse ShardRouter::Forward(const ShardMember& to, const http::HttpRequest& r,
                                        std::string_view why) {
  {
    absl::MutexLock lock(&mu_);
    ++forwarded_[membership_.options().redirect ? "redirect" : "proxy"];
  }
  if (membership_.options().redirect) {
    http::HttpResponse redirect =
        http::HttpResponse::Json(307, common::StrCat("{\"shard\":\"", to.name, "\"}\n"));
    redirect.headers.emplace_back("Location", to.rest + RequestTarget(r));
    redirect.headers.emplace_back("X-Podscope-Shard", to.name);
    return redirect;
  }
  absl::StatusOr<http::HttpClientResponse> answer =
      Call(to, r.method, RequestTarget(r), r, r.body, CallKind::kProxy);
  if (!answer.ok()) {
    return http::HttpResponse::Problem(
        502, "Bad Gateway",
        common::StrCat(why, ", which did not answer (", to.rest, "): ", answer.status().message()));
  }
  return FromPeer(*answer, to);
}

void ShardRouter::RememberHolder(const std::string& id, const std::string& member) {
  absl::MutexLock lock(&mu_);
  if (holders_.insert_or_assign(id, member).second) {
    holder_order_.push_back(id);
    if (holder_order_.size() > kMaxRememberedHolders) {
      holders_.erase(holder_order_.front());
      holder_order_.pop_front();
    }
  }
}

std::string ShardRouter::KnownHolder(const std::string& id) {
  absl::MutexLock lock(&mu_);
  const auto it = holders_.find(id);
  return it == holders_.end() ? "" : it->second;
}

http::HttpResponse ShardRouter::FindHolder(const ShardRouteRule& rule,
                                           const http::HttpHandler& local, http::HttpRequest& r) {
  const std::string id = r.params["id"];
  http::HttpResponse here = local(r);
  if (here.status != 404) return here;
  // Not here. An id with its maker's tag can only be there (a capture stays where it was
  // made): that shard alone is asked, and one made here and gone is a 404 without asking.
  // Otherwise the peer that answers the id's GET with anything but 404 holds it; the one that
  // held it last time is asked first.
  const std::shared_ptr<const ShardMap> map = membership_.current();
  std::vector<ShardMember> peers;
  if (const ShardMember* maker = map->MakerOf(id); maker != nullptr) {
    if (maker->name == map->self().name) return here;
    peers.push_back(*maker);
  } else {
    peers = map->peers();
    const std::string hint = KnownHolder(id);
    std::stable_partition(peers.begin(), peers.end(),
                          [&](const ShardMember& m) { return m.name == hint; });
  }
  std::vector<std::string> unreachable;
  const std::string locate = rule.locate_prefix + EncodePath(id);
  for (const ShardMember& peer : peers) {
    absl::StatusOr<http::HttpClientResponse> answer =
        Call(peer, "GET", locate, r, "", CallKind::kLookup);
    if (!answer.ok()) {
      unreachable.push_back(common::StrCat(peer.name, " (", answer.status().message(), ")"));
      continue;
    }
    if (answer->status == 401 || answer->status == 403) return FromPeer(*answer, peer);
    if (answer->status / 100 == 5 || answer->status == 429) {
      unreachable.push_back(common::StrCat(peer.name, " (HTTP ", answer->status, ")"));
      continue;
    }
    if (answer->status / 100 != 2) continue;  // 404: not there
    RememberHolder(id, peer.name);
    if (r.method == "GET" && r.path == locate) {
      absl::MutexLock lock(&mu_);
      ++forwarded_["proxy"];
      return FromPeer(*answer, peer);  // the locating call was the call
    }
    return Forward(peer, r, common::StrCat(id, " is held by shard ", peer.name));
  }
  if (!unreachable.empty()) {
    std::string names;
    for (const std::string& u : unreachable)
      common::StrAppend(&names, names.empty() ? "" : "; ", u);
    return http::HttpResponse::Problem(
        503, "Service Unavailable",
        common::StrCat(id, " is not on this shard, and these shards did not answer: ", names));
  }
  return here;
}

http::HttpResponse ShardRouter::Gather(const ShardRouteRule& rule, const http::HttpHandler& local,
                                       http::HttpRequest& r) {
  http::HttpResponse here = local(r);
  if (here.status != 200) return here;
  std::vector<boost::json::object> answers;
  std::optional<boost::json::object> mine = ParseObject(here.body);
  if (!mine) return here;
  answers.push_back(std::move(*mine));
  boost::json::array unreachable;
  const std::shared_ptr<const ShardMap> map = membership_.current();
  const std::string target = RequestTarget(r);
  for (const ShardMember& peer : map->peers()) {
    absl::StatusOr<http::HttpClientResponse> answer =
        Call(peer, "GET", target, r, "", CallKind::kLookup);
    std::optional<boost::json::object> doc;
    if (answer.ok() && answer->status == 200) doc = ParseObject(answer->body);
    if (!doc) {
      unreachable.push_back(
          boost::json::object{{"shard", peer.name},
                              {"error", answer.ok() ? common::StrCat("HTTP ", answer->status)
                                                    : std::string(answer.status().message())}});
      continue;
    }
    answers.push_back(std::move(*doc));
  }
  {
    absl::MutexLock lock(&mu_);
    ++forwarded_["gather"];
  }
  boost::json::object out;
  switch (rule.gather) {
    case GatherKind::kCaptures: {
      size_t limit = 100;
      if (const absl::StatusOr<int64_t> l = common::ParseInt(r.Query("limit")); l.ok() && *l > 0)
        limit = static_cast<size_t>(*l);
      boost::json::array merged;
      const std::string next = MergePage(answers, "captures", "id", "next_after", limit, &merged);
      out["captures"] = std::move(merged);
      out["next_after"] = next.empty() ? boost::json::value(nullptr) : boost::json::value(next);
      break;
    }
    case GatherKind::kWorkers: {
      // An agent serving jobs of several shards is connected to each, and each lists it with
      // the workers of its own jobs: one entry per agent, each worker once.
      size_t limit = 1000;
      if (const absl::StatusOr<int64_t> l = common::ParseInt(r.Query("limit")); l.ok() && *l > 0)
        limit = static_cast<size_t>(*l);
      std::vector<boost::json::object> agent_lists;
      for (const boost::json::object& a : answers) {
        boost::json::object copy;
        copy["agents"] = a.contains("agents") ? a.at("agents") : boost::json::array();
        if (a.contains("next")) copy["next"] = a.at("next");
        agent_lists.push_back(std::move(copy));
      }
      boost::json::array agents;
      const std::string next = MergePage(agent_lists, "agents", "agent_id", "next", limit, &agents);
      std::set<std::string> listed;
      for (const boost::json::value& a : agents) listed.insert(StringField(a, "agent_id"));
      std::map<std::tuple<std::string, int64_t, std::string>, size_t> seen;  // -> index in workers
      boost::json::array workers;
      for (const boost::json::object& a : answers) {
        const boost::json::value* list = a.if_contains("workers");
        if (list == nullptr || !list->is_array()) continue;
        for (const boost::json::value& w : list->get_array()) {
          if (!w.is_object() || !listed.count(StringField(w, "agent_id"))) continue;
          const auto [at, first] =
              seen.emplace(std::make_tuple(StringField(w, "job"), IntField(w.get_object(), "rank"),
                                           StringField(w, "agent_id")),
                           workers.size());
          if (first) {
            workers.push_back(w);
          } else if (StringField(workers[at->second], "health") == "disconnected" &&
                     StringField(w, "health") != "disconnected") {
            workers[at->second] = w;  // the replica it is connected to now
          }
        }
      }
      // Totals over every shard. Each worker is registered with one shard (its job's owner), so
      // workers add up; an agent connected to several shards is counted once where the whole
      // list is on this page, and once per shard otherwise (an upper bound).
      int64_t connected_workers = 0, connected_agents = 0, disconnected_agents = 0;
      for (const boost::json::object& a : answers) {
        connected_workers += IntField(a, "connected_workers");
        connected_agents += IntField(a, "connected_agents");
        disconnected_agents += IntField(a, "disconnected_agents");
      }
      if (next.empty()) {
        connected_agents = disconnected_agents = 0;
        for (const boost::json::value& a : agents)
          ++(StringField(a, "health") == "disconnected" ? disconnected_agents : connected_agents);
      }
      out["agents"] = std::move(agents);
      out["worker_count"] = workers.size();
      out["workers"] = std::move(workers);
      out["connected_agents"] = connected_agents;
      out["disconnected_agents"] = disconnected_agents;
      out["connected_workers"] = connected_workers;
      if (!next.empty()) out["next"] = next;
      break;
    }
    case GatherKind::kAlerts:
    case GatherKind::kSchedules: {
      const char* key = rule.gather == GatherKind::kAlerts ? "alerts" : "schedules";
      boost::json::array merged;
      for (boost::json::object& a : answers) {
        boost::json::value* list = a.if_contains(key);
        if (list == nullptr || !list->is_array()) continue;
        for (boost::json::value& item : list->get_array()) merged.push_back(std::move(item));
      }
      out[key] = std::move(merged);
      break;
    }
  }
  out["shards"] = map->members().size();
  if (!unreachable.empty()) out["unreachable_shards"] = std::move(unreachable);
  return http::HttpResponse::Json(200, common::JsonText(out) + "\n");
}

http::HttpResponse ShardRouter::Broadcast(const http::HttpHandler& local, http::HttpRequest& r) {
  http::HttpResponse here = local(r);
  if (here.status / 100 != 2) return here;
  std::string failed;
  for (const ShardMember& peer : membership_.current()->peers()) {
    absl::StatusOr<http::HttpClientResponse> answer =
        Call(peer, r.method, RequestTarget(r), r, r.body, CallKind::kLookup);
    if (!answer.ok() || answer->status / 100 != 2) {
      common::StrAppend(
          &failed, failed.empty() ? "" : "; ", peer.name, " (",
          answer.ok() ? http::ProblemDetail(*answer) : std::string(answer.status().message()), ")");
    }
  }
  {
    absl::MutexLock lock(&mu_);
    ++forwarded_["broadcast"];
  }
  if (!failed.empty()) {
    return http::HttpResponse::Problem(
        502, "Bad Gateway",
        common::StrCat("applied on this shard, but not on: ", failed, "; send it again"));
  }
  return here;
}

void ShardRouter::AppendMetrics(std::string* out) const {
  absl::MutexLock lock(&mu_);
  common::StrAppend(out,
                    "# HELP podscope_shard_forwarded_total REST calls answered with other shards "
                    "(proxied, redirected, gathered, broadcast).\n",
                    "# TYPE podscope_shard_forwarded_total counter\n");
  for (const char* how : {"proxy", "redirect", "gather", "broadcast"}) {
    const auto it = forwarded_.find(how);
    common::StrAppend(out, "podscope_shard_forwarded_total{how=\"", how, "\"} ",
                      it == forwarded_.end() ? 0 : it->second, "\n");
  }
  common::StrAppend(
      out, "# HELP podscope_shard_peer_errors_total Calls to other shards that failed.\n",
      "# TYPE podscope_shard_peer_errors_total counter\npodscope_shard_peer_errors_total ",
      peer_errors_, "\n",
      "# HELP podscope_shard_peer_calls_refused_total Calls to other shards not made: the peer "
      "had max_calls_per_peer in flight (busy), or failed to answer lately (quiet).\n",
      "# TYPE podscope_shard_peer_calls_refused_total counter\n",
      "podscope_shard_peer_calls_refused_total{reason=\"busy\"} ", refused_busy_, "\n",
      "podscope_shard_peer_calls_refused_total{reason=\"quiet\"} ", refused_quiet_, "\n");
}

}  // namespace podscope::coordinator
