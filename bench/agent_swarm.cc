// The scale benchmark: many podscope agents in one process, each serving simulated
// ranks on its own skewed, drifting clock, all connected to one podscope-coordinator. Measures
// what the README reports: capture fan-out (request -> every agent acknowledged), achieved
// start skew across workers on the aligned clock, clock-alignment error against the injected
// truth (optionally through a delay/jitter-injecting proxy), and the coordinator's CPU and
// memory while idle and during the capture.
//
//   podscope_agent_swarm --grpc 127.0.0.1:50051 --server http://127.0.0.1:8080
//       --coordinator-pid PID --agents 1024 [--jitter-ms 1 --delay-ms 0.2]
#include <signal.h>
#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "CLI/CLI.hpp"
#include "agent/agent.h"
#include "agent/collectors/simulated_ranks.h"
#include "bench/jitter_proxy.h"
#include "common/host_port.h"
#include "common/parse_number.h"
#include "common/str_util.h"
#include "http/http_client.h"
#include "spdlog/spdlog.h"

namespace {

using podscope::common::TimeNs;
using Steady = std::chrono::steady_clock;

// CPU seconds (user + system) and resident bytes of a process, from /proc.
struct ProcessSample {
  double cpu_seconds = 0;
  uint64_t rss_bytes = 0;
};
ProcessSample SampleProcess(int pid) {
  ProcessSample s;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return s;
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  std::vector<std::string> v;
  while (fields >> f) v.push_back(f);
  if (v.size() > 21) {
    const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    s.cpu_seconds = (podscope::common::ParseDouble(v[11]).value() +
                     podscope::common::ParseDouble(v[12]).value()) /
                    tick;  // utime, stime
    s.rss_bytes = static_cast<uint64_t>(podscope::common::ParseInt(v[21]).value()) *
                  static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  }
  return s;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::min<double>(v.size() - 1, std::ceil(p * v.size()) - 1))];
}

struct SwarmOptions {
  std::string grpc = "127.0.0.1:50051", server_url = "http://127.0.0.1:8080", job = "swarm";
  int sim_world = 32;
  int agents = 1024, first_agent = 0, total_agents = 0, ranks_per_agent = 1, coordinator_pid = 0,
      duration_ms = 2000, idle_seconds = 10, clock_burst = 8, settle_seconds = 150;
  double jitter_ms = 0, delay_ms = 0, max_offset_ms = 50, max_drift_ppm = 50;
  uint64_t seed = 1;
  bool serve_only = false, watch = false, verbose = false;
};

void AddFlags(CLI::App& app, SwarmOptions& o) {
  app.add_option("--grpc", o.grpc, "the coordinator's gRPC address");
  app.add_option("--server", o.server_url, "the coordinator's REST URL");
  app.add_option("--coordinator-pid", o.coordinator_pid,
                 "pid of the coordinator, for CPU and memory");
  app.add_option("--agents", o.agents, "agent instances in this process");
  app.add_option("--first-agent", o.first_agent,
                 "global index of this process's first agent (several swarm processes)");
  app.add_option("--total-agents", o.total_agents, "agents over all swarm processes [--agents]");
  app.add_flag("--serve-only", o.serve_only,
               "only run the agents (until killed); another swarm process measures");
  app.add_option("--ranks-per-agent", o.ranks_per_agent);
  app.add_option("--duration-ms", o.duration_ms, "capture window");
  app.add_option("--idle-seconds", o.idle_seconds, "how long to measure the idle coordinator");
  app.add_option("--settle-seconds", o.settle_seconds,
                 "idle is measured no sooner than this after every agent connected");
  app.add_option("--jitter-ms", o.jitter_ms,
                 "route the agents through a proxy adding uniform(0, jitter) per chunk");
  app.add_option("--delay-ms", o.delay_ms, "and this fixed one-way delay");
  app.add_option("--clock-burst", o.clock_burst, "exchanges per clock-sync burst");
  app.add_option("--max-offset-ms", o.max_offset_ms,
                 "agents' clocks are offset uniformly within +-this");
  app.add_option("--max-drift-ppm", o.max_drift_ppm, "and drift within +-this");
  app.add_option("--seed", o.seed);
  app.add_option("--sim-world", o.sim_world,
                 "ranks actually simulated; rank r serves rank r mod this (0: all)");
  app.add_option("--job", o.job);
  // Off by default, so that the capture figures stay those of capture traffic alone.
  app.add_flag("--watch", o.watch,
               "agents also stream watch data (step summaries) between captures");
  app.add_flag("--verbose", o.verbose, "log what every agent does (info), not only warnings");
}

// Every agent's clock: a known offset and drift against the host's, the same in every swarm
// process (seeded by the agent's global index), so the measuring process knows all of them.
// The reference is whole minutes, which every process computes alike.
std::vector<std::unique_ptr<podscope::agent::AgentClock>> MakeClocks(const SwarmOptions& o) {
  const TimeNs reference = podscope::agent::HostNowNs() / 60'000'000'000 * 60'000'000'000;
  std::vector<std::unique_ptr<podscope::agent::AgentClock>> clocks;
  for (int i = 0; i < o.total_agents; ++i) {
    std::mt19937_64 rng(o.seed * 1'000'003ull + static_cast<uint64_t>(i));
    std::uniform_real_distribution<double> unit(-1, 1);
    const double offset = unit(rng), drift = unit(rng);
    clocks.push_back(std::make_unique<podscope::agent::AgentClock>(
        static_cast<int64_t>(offset * o.max_offset_ms * 1e6), drift * o.max_drift_ppm, reference));
  }
  return clocks;
}

// This process's agents, each serving its simulated ranks, connecting to `target`.
std::vector<std::unique_ptr<podscope::agent::Agent>> StartSwarm(
    const SwarmOptions& o, const std::string& target,
    const std::vector<std::unique_ptr<podscope::agent::AgentClock>>& clocks,
    podscope::agent::StartTimer& start_timer) {
  std::vector<std::unique_ptr<podscope::agent::Agent>> swarm;
  for (int i = o.first_agent; i < o.first_agent + o.agents; ++i) {
    podscope::agent::SimulationSpec spec;
    spec.first_rank = i * o.ranks_per_agent;
    spec.last_rank = spec.first_rank + o.ranks_per_agent - 1;
    spec.world = o.total_agents * o.ranks_per_agent;
    spec.job = o.job;
    spec.profile = "light";
    spec.sim_world = o.sim_world;
    std::vector<std::unique_ptr<podscope::agent::Collector>> collectors;
    const std::string host = podscope::common::StrCat("sim-", i);
    collectors.push_back(
        std::make_unique<podscope::agent::SimulatedRanksCollector>(spec, host, *clocks[i]));
    podscope::agent::AgentOptions options;
    options.coordinator = target;
    options.agent_id = host;
    options.host = host;
    options.clock_burst = o.clock_burst;
    options.capture.start_timer = &start_timer;
    options.watch = o.watch;
    swarm.push_back(
        std::make_unique<podscope::agent::Agent>(options, *clocks[i], std::move(collectors)));
    swarm.back()->Start();
    // Agents of a real cluster come up over seconds, not in one instant on one host.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return swarm;
}

// The agents' clock error bounds in microseconds, from GET /v1/workers; `healthy_only` counts
// only healthy agents. Empty when the coordinator did not answer.
std::optional<std::vector<double>> ClockBoundsUs(const podscope::http::ServerAddress& server,
                                                 const std::string& job, bool healthy_only) {
  simdjson::dom::parser parser;
  auto r = podscope::http::HttpRequestTo(server, "GET", "/v1/workers?limit=10000&job=" + job);
  simdjson::dom::element doc;
  if (!r.ok() || r->status != 200 || parser.parse(r->body).get(doc) != simdjson::SUCCESS)
    return std::nullopt;
  std::vector<double> bounds;
  for (simdjson::dom::element a : doc["agents"].get_array()) {
    if (healthy_only && a["health"].get_string().value() != "healthy") continue;
    if (!a["clock"].is_null())
      bounds.push_back(a["clock"]["error_bound_ns"].get_int64().value() / 1e3);
  }
  return bounds;
}

// Until every agent (of every swarm process) is connected and has a clock model: their clock
// error bounds (us) then; nothing after 5 minutes.
std::optional<std::vector<double>> WaitConnected(const podscope::http::ServerAddress& server,
                                                 const SwarmOptions& o,
                                                 Steady::time_point connect_start) {
  std::vector<double> bounds;
  while (true) {
    bounds = ClockBoundsUs(server, o.job, /*healthy_only=*/true).value_or(std::vector<double>{});
    if (bounds.size() >= static_cast<size_t>(o.total_agents)) break;
    if (Steady::now() - connect_start > std::chrono::minutes(5)) {
      std::fprintf(stderr, "only %zu of %d agents connected after 5 minutes\n", bounds.size(),
                   o.total_agents);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  const double connect_s = std::chrono::duration<double>(Steady::now() - connect_start).count();
  std::printf(
      "agents: %d (%d ranks), all connected and synchronised in %.1f s; clock error bounds after "
      "connect: p50 %.1f us, "
      "p99 %.1f us\n",
      o.total_agents, o.total_agents * o.ranks_per_agent, connect_s, Percentile(bounds, 0.5),
      Percentile(bounds, 0.99));
  return bounds;
}

// Bursts taken while every agent connects at once are poor; the coordinator's clock keeper
// asks for better ones, a few agents at a time. Until the bounds stop improving (at most a
// minute), the coordinator is not idle yet; then the keeper's first rounds (it backs off per
// agent: 2, 4, 8, ... 60 s) are left to pass, since idle is what follows them.
void SettleClocks(const podscope::http::ServerAddress& server, const SwarmOptions& o,
                  const std::vector<double>& first) {
  const auto settle_start = Steady::now();
  double best_p99 = Percentile(first, 0.99), p50 = Percentile(first, 0.5);
  auto improved_at = Steady::now();
  while (Steady::now() - improved_at < std::chrono::seconds(6) &&
         Steady::now() - settle_start < std::chrono::minutes(1)) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    std::optional<std::vector<double>> bounds = ClockBoundsUs(server, o.job, false);
    if (!bounds) continue;
    const double p99 = Percentile(*bounds, 0.99);
    p50 = Percentile(*bounds, 0.5);
    if (p99 < 0.9 * best_p99) best_p99 = p99, improved_at = Steady::now();
  }
  std::printf("clock models settled in %.1f s more: error bounds p50 %.1f us, p99 %.1f us\n",
              std::chrono::duration<double>(Steady::now() - settle_start).count(), p50, best_p99);
  const auto idle_from = settle_start + std::chrono::seconds(o.settle_seconds);
  if (Steady::now() < idle_from) std::this_thread::sleep_until(idle_from);
}

// The idle coordinator: heartbeats and periodic clock sync only.
void MeasureIdle(const SwarmOptions& o) {
  const ProcessSample before = SampleProcess(o.coordinator_pid);
  std::this_thread::sleep_for(std::chrono::seconds(o.idle_seconds));
  const ProcessSample after = SampleProcess(o.coordinator_pid);
  std::printf("coordinator idle: %.2f%% of a core, %.1f MB RSS (over %d s)\n",
              100 * (after.cpu_seconds - before.cpu_seconds) / o.idle_seconds,
              after.rss_bytes / 1e6, o.idle_seconds);
}

// One capture of every worker, from request until it has ended, and what the coordinator spent.
struct CaptureRun {
  std::string id, state, body;
  double seconds = 0;
  ProcessSample before, after;
  uint64_t peak_rss = 0;
};

std::optional<CaptureRun> RunCapture(const podscope::http::ServerAddress& server,
                                     const SwarmOptions& o) {
  CaptureRun run;
  const bool sample = o.coordinator_pid > 0;
  if (sample) run.before = SampleProcess(o.coordinator_pid);
  const auto capture_start = Steady::now();
  auto posted = podscope::http::HttpRequestTo(
      server, "POST", "/v1/captures",
      podscope::common::StrCat("{\"job\":\"", o.job, "\",\"duration_ms\":", o.duration_ms, "}"),
      "application/json");
  if (!posted.ok() || posted->status != 202) {
    std::fprintf(
        stderr, "POST /v1/captures failed: %s\n",
        posted.ok() ? posted->body.c_str() : std::string(posted.status().message()).c_str());
    return std::nullopt;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  run.id = parser.parse(posted->body).get(doc) == simdjson::SUCCESS
               ? std::string(doc["id"].get_string().value())
               : "";
  while (true) {
    auto r = podscope::http::HttpRequestTo(server, "GET", "/v1/captures/" + run.id);
    if (r.ok() && r->status == 200 && parser.parse(r->body).get(doc) == simdjson::SUCCESS) {
      run.state = std::string(doc["state"].get_string().value());
      run.body = r->body;
    }
    if (sample) run.peak_rss = std::max(run.peak_rss, SampleProcess(o.coordinator_pid).rss_bytes);
    if (run.state == "complete" || run.state == "partial" || run.state == "failed" ||
        run.state == "cancelled")
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  run.seconds = std::chrono::duration<double>(Steady::now() - capture_start).count();
  if (sample) run.after = SampleProcess(o.coordinator_pid);
  return run;
}

// Each complete worker's model against the injected truth at `middle`. A model from the network
// exchanges is absolute (against the coordinator's clock); one refined by collectives is
// relative to the pod's common clock, so its error counts against the median refined worker's.
struct Aligned {
  bool refined;
  int64_t error, bound;
};

void ReportAlignment(const std::vector<Aligned>& aligned) {
  // Refined models are checked the way they are used, against each other: a worker and the
  // median refined worker agree within the sum of their bounds. (The pod's common clock is the
  // mean over every agent the refinement fitted, which the benchmark cannot see exactly.)
  std::vector<const Aligned*> refined;
  for (const Aligned& a : aligned) {
    if (a.refined) refined.push_back(&a);
  }
  std::sort(refined.begin(), refined.end(),
            [](const Aligned* x, const Aligned* y) { return x->error < y->error; });
  const Aligned* median = refined.empty() ? nullptr : refined[refined.size() / 2];
  double refined_mean = 0;
  for (const Aligned* a : refined)
    refined_mean += static_cast<double>(a->error) / static_cast<double>(refined.size());
  std::vector<double> network_error_us, refined_error_us;
  size_t within_bound = 0;
  double max_bound_us = 0;
  for (const Aligned& a : aligned) {
    if (a.refined) {
      const double error = std::abs(static_cast<double>(a.error - median->error));
      refined_error_us.push_back(error / 1e3);
      within_bound += error <= static_cast<double>(a.bound + median->bound);
    } else {
      const double error = std::abs(static_cast<double>(a.error));
      network_error_us.push_back(error / 1e3);
      within_bound += error <= static_cast<double>(a.bound);
    }
    max_bound_us = std::max(max_bound_us, a.bound / 1e3);
  }
  if (!network_error_us.empty()) {
    std::printf(
        "clock alignment, %zu network models, error vs injected truth: p50 %.1f us, p99 %.1f us, "
        "max %.1f us\n",
        network_error_us.size(), Percentile(network_error_us, 0.5),
        Percentile(network_error_us, 0.99), Percentile(network_error_us, 1.0));
  }
  if (!refined_error_us.empty()) {
    std::printf(
        "clock alignment, %zu models refined by collectives, error vs injected truth relative to "
        "the median one: p50 %.1f us, "
        "p99 %.1f us, max %.1f us (the pod's common clock is %.1f us off the coordinator's)\n",
        refined_error_us.size(), Percentile(refined_error_us, 0.5),
        Percentile(refined_error_us, 0.99), Percentile(refined_error_us, 1.0), refined_mean / 1e3);
  }
  std::printf(
      "within the reported bound (refined: with the median one, within both bounds): %zu/%zu (max "
      "bound %.1f us)\n",
      within_bound, aligned.size(), max_bound_us);
}

// Fan-out, start skew, lateness and alignment of the capture in `run`; false unless every worker
// completed.
bool ReportCapture(const CaptureRun& run, const SwarmOptions& o,
                   const std::vector<std::unique_ptr<podscope::agent::AgentClock>>& clocks) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(run.body).get(doc) != simdjson::SUCCESS) return false;
  const TimeNs created = doc["created_ns"].get_int64().value();
  const TimeNs window_start = doc["window"]["start_ns"].get_int64().value();
  const TimeNs middle = window_start + doc["window"]["duration_ns"].get_int64().value() / 2;
  std::vector<double> ack_ms, skew_us, starts_ns;
  size_t complete = 0;
  std::vector<Aligned> aligned;
  for (simdjson::dom::element w : doc["workers"].get_array()) {
    if (w["acknowledged_ns"].get_int64().value() == 0)
      continue;  // never heard from, or failed first
    ack_ms.push_back((w["acknowledged_ns"].get_int64().value() - created) / 1e6);
    if (!w["start_skew_ns"].is_null()) {
      skew_us.push_back(std::abs(w["start_skew_ns"].get_int64().value()) / 1e3);
      starts_ns.push_back(static_cast<double>(w["start_skew_ns"].get_int64().value()));
    }
    if (w["state"].get_string().value() != "complete") continue;
    ++complete;
    const int64_t rank = w["rank"].get_int64().value();
    simdjson::dom::element c = w["clock"];
    const podscope::common::ClockModel model{
        c["offset_ns"].get_int64().value(), c["drift_ppb"].get_int64().value(),
        c["reference_ns"].get_int64().value(), c["error_bound_ns"].get_int64().value(),
        podscope::common::ClockSource::kNetwork};
    const podscope::agent::AgentClock& truth = *clocks[rank / o.ranks_per_agent];
    aligned.push_back({c["source"].get_string().value() == "collective",
                       model.ToAligned(truth.FromHost(middle)) - middle, model.error_bound_ns});
  }
  const double lead_ms = (window_start - created) / 1e6;
  const size_t workers = doc["workers"].get_array().size();
  std::printf("capture %s: %s, %zu/%zu workers complete, %.2f s from request to stored\n",
              run.id.c_str(), run.state.c_str(), complete, workers, run.seconds);
  size_t within_lead = 0;
  for (double ms : ack_ms) within_lead += ms < lead_ms;
  std::printf(
      "fan-out (request -> agent acknowledged): p50 %.2f ms, p99 %.2f ms, max %.2f ms; lead %.1f "
      "ms: %s "
      "(%zu of %zu workers acknowledged within it)\n",
      Percentile(ack_ms, 0.5), Percentile(ack_ms, 0.99), Percentile(ack_ms, 1.0), lead_ms,
      within_lead == workers ? "all armed within the lead" : "NOT all armed within the lead",
      within_lead, workers);
  // Skew across workers: each worker's start against the median worker's, on the aligned clock;
  // lateness: against the requested instant (a common delay does not misalign anything).
  const double median_start = Percentile(starts_ns, 0.5);
  std::vector<double> spread_us;
  for (double s : starts_ns) spread_us.push_back(std::abs(s - median_start) / 1e3);
  std::printf(
      "start skew across workers (vs the median worker, aligned clock): p50 %.1f us, p99 %.1f us, "
      "max %.1f us\n",
      Percentile(spread_us, 0.5), Percentile(spread_us, 0.99), Percentile(spread_us, 1.0));
  std::printf("start lateness vs the requested instant: p50 %.1f us, p99 %.1f us, max %.1f us\n",
              Percentile(skew_us, 0.5), Percentile(skew_us, 0.99), Percentile(skew_us, 1.0));
  ReportAlignment(aligned);
  if (o.coordinator_pid > 0) {
    std::printf("coordinator during the capture: %.1f%% of a core over %.2f s, peak %.1f MB RSS\n",
                100 * (run.after.cpu_seconds - run.before.cpu_seconds) / run.seconds, run.seconds,
                run.peak_rss / 1e6);
  }
  return complete == workers;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"podscope_agent_swarm: many simulated agents against one coordinator"};
  SwarmOptions o;
  AddFlags(app, o);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(o.verbose ? spdlog::level::info : spdlog::level::warn);
  // Serving agents stop on SIGINT/SIGTERM, waited for on the main thread only.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  if (o.serve_only) pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = podscope::http::ParseServerUrl(o.server_url);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 2;
  }
  std::unique_ptr<podscope::bench::JitterProxy> proxy;
  std::string target = o.grpc;
  if (o.jitter_ms > 0 || o.delay_ms > 0) {
    const absl::StatusOr<podscope::common::HostPort> grpc = podscope::common::ParseHostPort(o.grpc);
    if (!grpc.ok()) {
      std::fprintf(stderr, "--grpc: %s\n", std::string(grpc.status().message()).c_str());
      return 2;
    }
    proxy = std::make_unique<podscope::bench::JitterProxy>(
        grpc->host, grpc->port, static_cast<int64_t>(o.delay_ms * 1e6),
        static_cast<int64_t>(o.jitter_ms * 1e6), o.seed);
    target = "127.0.0.1:" + std::to_string(proxy->port());
    std::printf(
        "network: through a proxy adding %.3f ms + uniform(0, %.3f ms) per chunk and direction\n",
        o.delay_ms, o.jitter_ms);
  }
  if (o.total_agents == 0) o.total_agents = o.first_agent + o.agents;
  const std::vector<std::unique_ptr<podscope::agent::AgentClock>> clocks = MakeClocks(o);
  // One start timer for the process, as one agent has one for all its collectors: the starts
  // of its agents fire back to back instead of as many threads waking at once.
  podscope::agent::StartTimer start_timer;
  const auto connect_start = Steady::now();
  std::vector<std::unique_ptr<podscope::agent::Agent>> swarm =
      StartSwarm(o, target, clocks, start_timer);
  auto stop = [&swarm] {
    for (auto& a : swarm) a->Stop();
  };
  if (o.serve_only) {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    stop();
    return 0;
  }
  std::optional<std::vector<double>> connect_bounds = WaitConnected(*server, o, connect_start);
  if (!connect_bounds) return 1;
  SettleClocks(*server, o, *connect_bounds);
  if (o.coordinator_pid > 0) MeasureIdle(o);
  std::optional<CaptureRun> run = RunCapture(*server, o);
  if (!run) return 1;
  const bool complete = ReportCapture(*run, o, clocks);
  stop();
  return complete ? 0 : 1;
}
