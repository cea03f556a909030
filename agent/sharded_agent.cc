#include "agent/sharded_agent.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "common/str_util.h"
#include "spdlog/spdlog.h"

namespace podscope::agent {

// The jobs one link serves: its Agent sees only their workers.
struct JobSet {
  mutable absl::Mutex mu;
  std::set<std::string> jobs ABSL_GUARDED_BY(mu);
  bool Contains(const std::string& job) const {
    absl::MutexLock lock(&mu);
    return jobs.count(job) > 0;
  }
};

struct ShardedAgent::Link {
  std::string address;
  // Since when it has not been connected (unset while connected): a link that stays down past
  // kGiveUpOnLink loses its jobs (its replica may be gone for good).
  std::optional<TimeNs> down_since;  // host clock
  std::shared_ptr<JobSet> jobs = std::make_shared<JobSet>();
  std::vector<JobView*> views;  // owned by `agent`
  std::unique_ptr<Agent> agent;
};

// Routes each job's watch data to the sink of the link that serves the job (the first link for
// a job not assigned yet).
class ShardedAgent::WatchRouter : public WatchSink {
 public:
  void Step(std::string_view job, const common::StepSummary& step) override {
    absl::MutexLock lock(&mu_);
    if (WatchSink* sink = SinkFor(job)) sink->Step(job, step);
  }
  void Progress(std::string_view job, const common::RankProgress& progress) override {
    absl::MutexLock lock(&mu_);
    if (WatchSink* sink = SinkFor(job)) sink->Progress(job, progress);
  }
  void SetSink(const Link* link, WatchSink* sink) {
    absl::MutexLock lock(&mu_);
    if (sink == nullptr) {
      sinks_.erase(link);
    } else {
      sinks_[link] = sink;
    }
  }
  void Assign(std::map<std::string, const Link*> jobs, const Link* fallback) {
    absl::MutexLock lock(&mu_);
    jobs_ = std::move(jobs);
    fallback_ = fallback;
  }

 private:
  WatchSink* SinkFor(std::string_view job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const auto it = jobs_.find(std::string(job));
    const auto sink = sinks_.find(it != jobs_.end() ? it->second : fallback_);
    return sink == sinks_.end() ? nullptr : sink->second;
  }
  absl::Mutex mu_;
  std::map<const Link*, WatchSink*> sinks_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, const Link*> jobs_ ABSL_GUARDED_BY(mu_);
  const Link* fallback_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// A collector as one link's Agent sees it: only the workers of the link's jobs. Captures pass
// through untouched (a capture under way finishes even if its job has moved meanwhile).
class ShardedAgent::JobView : public Collector {
 public:
  JobView(Collector& real, const Link& link, WatchRouter& router)
      : real_(real), link_(link), router_(router) {}

  std::string_view name() const override { return real_.name(); }
  std::vector<WorkerIdentity> Workers() const override {
    std::vector<WorkerIdentity> mine;
    for (WorkerIdentity& w : real_.Workers()) {
      if (link_.jobs->Contains(w.job)) mine.push_back(std::move(w));
    }
    return mine;
  }
  void SetWorkersChangedCallback(std::function<void()> callback) override {
    absl::MutexLock lock(&mu_);
    changed_ = std::move(callback);
  }
  void NotifyWorkersChanged() {
    std::function<void()> changed;
    {
      absl::MutexLock lock(&mu_);
      changed = changed_;
    }
    if (changed) changed();
  }
  absl::Status Arm(const CaptureWindow& window) override { return real_.Arm(window); }
  absl::Status Start(std::string_view capture_id) override { return real_.Start(capture_id); }
  absl::Status Stop(std::string_view capture_id) override { return real_.Stop(capture_id); }
  absl::StatusOr<CollectedWorker> Drain(std::string_view capture_id, int32_t rank) override {
    return real_.Drain(capture_id, rank);
  }
  void Forget(std::string_view capture_id) override { real_.Forget(capture_id); }
  void StartWatch(WatchSink* sink) override { router_.SetSink(&link_, sink); }
  void StopWatch() override { router_.SetSink(&link_, nullptr); }

 private:
  Collector& real_;
  const Link& link_;
  WatchRouter& router_;
  absl::Mutex mu_;
  std::function<void()> changed_ ABSL_GUARDED_BY(mu_);
};

ShardedAgent::ShardedAgent(AgentOptions options, const AgentClock& clock,
                           std::vector<std::unique_ptr<Collector>> collectors)
    : options_(std::move(options)),
      clock_(clock),
      collectors_(std::move(collectors)),
      watch_router_(std::make_unique<WatchRouter>()) {
  if (options_.host.empty()) {
    char name[256] = {};
    options_.host =
        gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0' ? name : "unknown-host";
  }
  if (options_.agent_id.empty()) options_.agent_id = common::StrCat(options_.host, "-", getpid());
  // One start timer for every link: a capture's start does not depend on which link armed it.
  if (options_.capture.start_timer == nullptr) {
    own_start_timer_ = std::make_unique<StartTimer>(clock_.host_time());
    options_.capture.start_timer = own_start_timer_.get();
  }
  for (const std::unique_ptr<Collector>& c : collectors_) {
    c->SetWorkersChangedCallback([this] {
      absl::MutexLock lock(&mu_);
      if (!collectors_alive_) return;
      dirty_ = true;
    });
  }
}

ShardedAgent::~ShardedAgent() {
  Stop();
  {
    absl::MutexLock lock(&mu_);
    collectors_alive_ = false;
  }
  collectors_.clear();  // while the callbacks they may still call are alive
}

std::set<std::string> ShardedAgent::CurrentJobs() const {
  std::set<std::string> jobs;
  for (const std::unique_ptr<Collector>& c : collectors_) {
    for (const WorkerIdentity& w : c->Workers()) jobs.insert(w.job);
  }
  return jobs;
}

ShardedAgent::Link* ShardedAgent::OpenLink(const std::string& address, const std::string& shard) {
  auto link = std::make_unique<Link>();
  link->address = address;
  AgentOptions options = options_;
  options.coordinator = address;
  // The configured name is the configured coordinator's; a shard is checked against its own.
  if (!links_.empty()) options.tls_server_name.clear();
  options.on_shard_owners = [this](const v1::ShardOwners& news) {
    absl::MutexLock lock(&mu_);
    for (const v1::JobOwner& o : news.owners()) owners_[o.job()] = {o.shard(), o.grpc()};
    dirty_ = true;
  };
  std::vector<std::unique_ptr<Collector>> views;
  for (const std::unique_ptr<Collector>& c : collectors_) {
    auto view = std::make_unique<JobView>(*c, *link, *watch_router_);
    link->views.push_back(view.get());
    views.push_back(std::move(view));
  }
  link->agent = std::make_unique<Agent>(std::move(options), clock_, std::move(views));
  if (!links_.empty()) {
    spdlog::info("agent {}: opening a control stream to shard {} at {}", options_.agent_id, shard,
                 address);
  }
  links_.push_back(std::move(link));
  return links_.back().get();
}

void ShardedAgent::Start() {
  std::vector<Agent*> start;
  {
    absl::MutexLock lock(&mu_);
    Link* seed = OpenLink(options_.coordinator, "");
    std::set<std::string> jobs = CurrentJobs();
    absl::MutexLock jobs_lock(&seed->jobs->mu);
    seed->jobs->jobs = std::move(jobs);
    watch_router_->Assign({}, seed);
    start.push_back(seed->agent.get());
  }
  for (Agent* a : start) a->Start();
  if (options_.watch) {
    for (const std::unique_ptr<Collector>& c : collectors_) c->StartWatch(watch_router_.get());
  }
  reconcile_thread_ = std::thread([this] { ReconcileLoop(); });
}

void ShardedAgent::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (reconcile_thread_.joinable()) reconcile_thread_.join();
  if (options_.watch) {
    for (const std::unique_ptr<Collector>& c : collectors_) c->StopWatch();
  }
  std::vector<std::unique_ptr<Link>> links;
  {
    absl::MutexLock lock(&mu_);
    links.swap(links_);
    for (auto& l : closing_) links.push_back(std::move(l));
    closing_.clear();
  }
  for (auto& l : links) l->agent->Stop();
  links.clear();
}

std::string ShardedAgent::refusal() const {
  absl::MutexLock lock(&mu_);
  for (const auto& l : links_) {
    if (std::string r = l->agent->refusal(); !r.empty()) return r;
  }
  return "";
}

bool ShardedAgent::connected() const {
  absl::MutexLock lock(&mu_);
  return !links_.empty() && std::all_of(links_.begin(), links_.end(),
                                        [](const auto& l) { return l->agent->connected(); });
}

void ShardedAgent::ReconcileLoop() {
  const common::TimeSource& time = clock_.host_time();
  const auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || dirty_; };
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    // Also once a second: a link kept open for a capture in flight closes once it is over.
    time.AwaitUntil(mu_, absl::Condition(&woken), time.Now() + common::kNanosPerSecond);
    if (stopping_) return;
    dirty_ = false;
    mu_.Unlock();
    Reconcile();
    mu_.Lock();
  }
}

void ShardedAgent::Reconcile() {
  // A replica that stays unreachable this long is given up on: its jobs' owners are asked again
  // through the configured address (scaled away, or a grpc address nodes cannot reach).
  constexpr TimeNs kGiveUpOnLink = 30 * common::kNanosPerSecond;
  const TimeNs now = clock_.host_time().Now();
  const std::set<std::string> jobs = CurrentJobs();
  std::vector<Agent*> to_start;
  std::vector<std::unique_ptr<Link>> to_close;
  std::vector<JobView*> to_notify;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    std::map<const Link*, bool> up;
    for (const auto& l : links_) {
      up[l.get()] = l->agent->connected();
      if (up[l.get()]) {
        l->down_since.reset();
      } else if (!l->down_since) {
        l->down_since = now;
      }
    }
    // Links given up on: the owners they stood for are forgotten, so their jobs go back to the
    // default link, whose coordinator says again who owns them.
    std::set<const Link*> dead;
    for (const auto& l : links_) {
      if (l->down_since && now - *l->down_since > kGiveUpOnLink &&
          l->address != options_.coordinator) {
        dead.insert(l.get());
        std::erase_if(owners_, [&](const auto& o) { return o.second.second == l->address; });
      }
    }
    // The default link: a connected one dialling the configured address, else any connected
    // one, else the configured address (dialled again if no link does).
    auto pick_default = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> Link* {
      Link* any_up = nullptr;
      for (const auto& l : links_) {
        if (dead.count(l.get())) continue;
        if (up[l.get()] && l->address == options_.coordinator) return l.get();
        if (up[l.get()] && any_up == nullptr) any_up = l.get();
      }
      if (any_up != nullptr) return any_up;
      for (const auto& l : links_) {
        if (l->address == options_.coordinator) return l.get();
      }
      Link* seed = OpenLink(options_.coordinator, "");
      to_start.push_back(seed->agent.get());
      return seed;
    };
    Link* fallback = pick_default();
    // Where each job is now, so that it moves only once its new link is up.
    std::map<std::string, Link*> current;
    for (const auto& l : links_) {
      absl::MutexLock jobs_lock(&l->jobs->mu);
      for (const std::string& job : l->jobs->jobs) current[job] = l.get();
    }
    // Each job to its owner's link: the link its shard welcomed, else one dialling its address,
    // else a new one. Until that link is connected the job stays where it is (if that is up).
    std::map<Link*, std::set<std::string>> want;
    std::set<const Link*>
        awaited;  // owners' links not yet up: kept open though they have no job yet
    std::map<std::string, const Link*> assignment;
    for (const std::string& job : jobs) {
      Link* link = fallback;
      if (const auto owner = owners_.find(job); owner != owners_.end()) {
        const auto& [shard, address] = owner->second;
        Link* target = nullptr;
        for (const auto& l : links_) {
          if (!dead.count(l.get()) && !shard.empty() && l->agent->shard() == shard)
            target = l.get();
        }
        for (const auto& l : links_) {
          if (target == nullptr && !dead.count(l.get()) && l->address == address) target = l.get();
        }
        if (target == nullptr) {
          target = OpenLink(address, shard);
          to_start.push_back(target->agent.get());
          up[target] = false;
        }
        link = target;
        const auto here = current.find(job);
        if (!up[target] && here != current.end() && here->second != target && up[here->second] &&
            !dead.count(here->second)) {
          link = here->second;
          awaited.insert(target);
        }
      }
      want[link].insert(job);
      assignment[job] = link;
    }
    for (const auto& l : links_) {
      absl::MutexLock jobs_lock(&l->jobs->mu);
      l->jobs->jobs = want[l.get()];
    }
    // A link without jobs closes, unless a capture it started still runs there, its owner's
    // jobs wait for it to come up, or it is the last one (an agent without workers still talks
    // to a coordinator). The fallback is only needed while a job sits on it.
    for (auto it = links_.begin(); it != links_.end() && links_.size() > 1;) {
      Link* l = it->get();
      if (want[l].empty() && !awaited.count(l) && !l->agent->busy()) {
        spdlog::info("agent {}: closing the control stream to {}: {}", options_.agent_id,
                     l->address,
                     dead.count(l) ? "unreachable for too long"
                                   : "the shard there owns none of this node's jobs");
        to_close.push_back(std::move(*it));
        it = links_.erase(it);
      } else {
        ++it;
      }
    }
    watch_router_->Assign(std::move(assignment), fallback);
    for (const auto& l : links_)
      to_notify.insert(to_notify.end(), l->views.begin(), l->views.end());
  }
  for (Agent* a : to_start) a->Start();
  // Every link re-reads its workers (a moved job's ranks leave one coordinator and reach another).
  for (JobView* v : to_notify) v->NotifyWorkersChanged();
  for (auto& l : to_close) l->agent->Stop();
}

}  // namespace podscope::agent
