#include "tec/controller/controller.hpp"
#include "common.hpp"
#include "event_outlet.hpp"
#include "eviction_runner.hpp"
#include "outcome_ledger.hpp"
#include "pod_decider.hpp"
#include "policy_state.hpp"
#include "queue_entries.hpp"
#include "storm_breaker.hpp"
#include "tainted_nodes.hpp"
#include "tec/base/logger.hpp"
#include "worker_pool.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <tuple>
#include <unordered_map>
#include <utility>

// The controller wired from its parts; each part's header says what it owns and on which
// threads it runs. The route of an update: controller::node_updated/pod_updated (the intake
// filters, the storm breaker) -> worker_pool -> pod_decider -> queue_entries -> the timed
// queue -> eviction_runner -> the sink.

namespace tec::controller {

std::vector<taint> no_execute_taints(const std::vector<taint>& taints) {
  std::vector<taint> out;
  for (const taint& t : taints) {
    if (t.effect == taint_effect::no_execute) {
      out.push_back(t);
    }
  }
  return out;
}

namespace {

// Equality of the NoExecute subsequences, without copying.
bool same_no_execute(const std::vector<taint>& a, const std::vector<taint>& b) {
  auto ia = a.begin();
  auto ib = b.begin();
  const auto skip = [](auto& it, const auto end) {
    while (it != end && it->effect != taint_effect::no_execute) {
      ++it;
    }
  };
  for (;;) {
    skip(ia, a.end());
    skip(ib, b.end());
    if (ia == a.end() || ib == b.end()) {
      return ia == a.end() && ib == b.end();
    }
    if (!(*ia == *ib)) {
      return false;
    }
    ++ia;
    ++ib;
  }
}

// An entry's state and why it waits, as eviction_view names them. Only the storm breaker
// pauses the queue (set_paused), and the groups are {node, namespace} (schedule()).
std::pair<std::string_view, std::string_view> state_of(const timedqueue::entry_info& e) {
  switch (e.state) {
    case timedqueue::entry_state::pending:
      return {"pending", ""};
    case timedqueue::entry_state::running:
      return {"running", ""};
    case timedqueue::entry_state::backoff:
      return {"retrying", "backoff"};
    case timedqueue::entry_state::held:
      break;
  }
  return {"waiting", detail::why_held(e.hold, e.hold_group, e.deferred.tag)};
}

timedqueue::admission_limits admission_of(const rate_limit_policy& r) {
  timedqueue::admission_limits a;
  a.starts_per_second = r.evictions_per_second;
  a.burst = r.burst;
  a.max_running_per_group = {r.max_in_flight_per_node, r.max_in_flight_per_namespace};
  return a;
}

}  // namespace

detail::counters::counters() {
  table.push_back(metrics::counter_row_by(
      "reason", "pods_skipped_total",
      "Decisions that left a pod on a tainted node alone for a scoping rule of the policy or the "
      "opt-out annotation, by reason.",
      [this] {
        std::vector<metrics::sample> out;
        for (std::size_t r = 0; r < skip_reason_count; ++r) {
          out.push_back({std::string(to_string(static_cast<skip_reason>(r))),
                         static_cast<double>(skipped_by[r].load(std::memory_order_relaxed))});
        }
        return out;
      }));
}

struct controller::impl {
  impl(const pod_index& pods, eviction_sink& sink, timedqueue::driver& drv,
       controller_options options)
      : log_(base::named_logger("controller")),
        clock_(options.clock ? std::move(options.clock) : base::real_clock()),
        outlet_(sink, drv, policy_, std::move(options.on_decision)),
        ledger_(drv, std::move(options.on_outcome)),
        tainted_(std::max<std::size_t>(options.workers, 1)),
        runner_(pods, sink, drv, outlet_, policy_, tainted_, ctr_, log_,
                detail::runner_options{std::max<std::uint32_t>(options.stuck_after, 1),
                                       options.stuck_event_interval, std::move(options.on_deleted),
                                       std::move(options.on_waited), *clock_, ledger_}),
        queue_(
            drv,
            [this](const timedqueue::run_info& info, timedqueue::completion done) {
              runner_.run(info, std::move(done));
            },
            options.retry),
        breaker_(queue_, std::move(options.on_breaker), log_),
        entries_(queue_, runner_, outlet_, ledger_, ctr_, log_),
        decider_(
            pods, drv, tainted_, entries_, outlet_, policy_, ctr_, log_,
            detail::decider_options{options.deadlines_from_taint_time, options.scheduled_events,
                                    *clock_, std::move(options.namespace_opted_out), node_holds_}),
        pool_(std::max<std::size_t>(options.workers, 1), options.threaded, decider_, ctr_, log_) {
    apply_policy(options.policy, /*at_start=*/true);
  }

  // `at_start`: the pods are not decided again (no node is known yet).
  void apply_policy(const eviction_policy& p, bool at_start = false) {
    const bool rescope = policy_.replace(p);
    queue_.set_admission(admission_of(p.rate_limit));
    breaker_.configure(p.storm_breaker, tainted_);
    if (rescope && !at_start) {
      log_->info("scoping rules changed: deciding every pod on a tainted node again");
      redecide_all();
    }
  }

  // Every tainted node decided again (a policy change, a namespace's opt-out changed), shard
  // by shard (a shard of the tainted table is a worker's).
  void redecide_all() {
    for (std::size_t i = 0; i < tainted_.shard_count(); ++i) {
      std::vector<std::pair<std::string, std::vector<taint>>> nodes;
      tainted_.for_each_in(i, [&](const std::string& node, const std::vector<taint>& taints) {
        nodes.emplace_back(node, taints);
      });
      for (auto& [name, taints] : nodes) {
        if (!pool_.requeue_node(name, std::move(taints))) {
          return;
        }
      }
    }
  }

  // A node's hold-until annotation at intake (any thread): judged once per distinct value,
  // with a Warning event on the node for one ignored.
  void judge_node_hold(const node_view& n) {
    const detail::hold_verdict v = node_holds_.see(n.name, n.hold, clock_->wall());
    if (v.ignored) {
      const std::string detail = event_detail("\"" + n.hold->value + "\" is " + *v.ignored +
                                              "; evictions go as scheduled");
      log_->warn("ignoring the hold-until annotation node=\"{}\": {}", n.name, detail);
      outlet_.record_node(n.name, event_kind::hold_ignored, detail);
    }
  }

  void shutdown() {
    if (shut_down_.exchange(true)) {
      return;
    }
    pool_.stop();
    queue_.shutdown();
  }

  std::shared_ptr<spdlog::logger> log_;
  std::shared_ptr<base::clock> clock_;
  detail::counters ctr_;
  detail::hold_book node_holds_;  // the nodes' hold-until annotations, judged at intake
  detail::policy_state policy_;
  detail::event_outlet outlet_;
  detail::outcome_ledger ledger_;
  detail::tainted_nodes tainted_;
  detail::eviction_runner runner_;
  // Its work runs in runner_ and what runner_ borrows (above); the parts below schedule,
  // cancel and pause it. shutdown() stops the workers, then waits for the evictions in flight.
  timedqueue::timed_queue queue_;
  detail::storm_breaker breaker_;
  detail::queue_entries entries_;
  detail::pod_decider decider_;
  detail::worker_pool pool_;
  std::atomic<bool> shut_down_{false};
};

controller::controller(const pod_index& pods, eviction_sink& sink, timedqueue::driver& drv,
                       controller_options options)
    : impl_(std::make_unique<impl>(pods, sink, drv, std::move(options))) {}

controller::~controller() {
  impl_->shutdown();
}

void controller::start() {
  impl_->pool_.start();
}

void controller::shutdown() {
  impl_->shutdown();
}

bool controller::node_updated(const node_view* old_node, const node_view* new_node,
                              update_origin origin) {
  if (old_node == nullptr && new_node == nullptr) {
    return false;
  }
  if (old_node != nullptr && new_node != nullptr &&
      same_no_execute(old_node->taints, new_node->taints)) {
    if (old_node->hold == new_node->hold || new_node->name.empty()) {
      detail::bump(impl_->ctr_.ignored);
      return false;
    }
    // Only its hold-until annotation changed: its pods are decided again when it is tainted.
    impl_->judge_node_hold(*new_node);
    std::vector<taint> taints = no_execute_taints(new_node->taints);
    if (taints.empty()) {
      detail::bump(impl_->ctr_.ignored);
      return false;
    }
    return impl_->pool_.enqueue_node(new_node->name, std::move(taints), false);
  }
  if (new_node != nullptr) {
    impl_->judge_node_hold(*new_node);
  } else {
    impl_->node_holds_.forget(old_node->name);
  }
  if (!impl_->pool_.stopping()) {
    impl_->breaker_.node_updated(old_node, new_node);
  }
  const node_view& current = new_node != nullptr ? *new_node : *old_node;
  if (current.name.empty()) {
    impl_->log_->warn("ignoring a node update without a name");
    detail::bump(impl_->ctr_.ignored);
    return false;
  }
  std::optional<std::vector<taint>> taints;
  if (new_node != nullptr) {
    taints = no_execute_taints(new_node->taints);
  }
  return impl_->pool_.enqueue_node(current.name, std::move(taints),
                                   origin == update_origin::replay);
}

bool controller::pod_updated(const pod_view* old_pod, const pod_view* new_pod) {
  if (old_pod == nullptr && new_pod == nullptr) {
    return false;
  }
  if (old_pod != nullptr && new_pod != nullptr && old_pod->uid == new_pod->uid &&
      old_pod->node_name == new_pod->node_name && old_pod->tolerations == new_pod->tolerations &&
      old_pod->opted_out == new_pod->opted_out && old_pod->hold == new_pod->hold &&
      (!impl_->policy_.scoped() ||
       (old_pod->labels == new_pod->labels && old_pod->phase == new_pod->phase &&
        old_pod->owner_kind == new_pod->owner_kind)) &&
      // The deletionTimestamp appearing is decided only when an eviction of the pod waits.
      (old_pod->terminating || !new_pod->terminating ||
       !impl_->entries_.eviction_waits(*new_pod))) {
    detail::bump(impl_->ctr_.ignored);
    return false;
  }
  const pod_view& current = new_pod != nullptr ? *new_pod : *old_pod;
  std::string_view node = current.node_name;
  if (node.empty() && old_pod != nullptr && new_pod != nullptr && old_pod->uid != new_pod->uid) {
    node = old_pod->node_name;  // Replaced by an unscheduled pod: drop the old one's eviction.
  }
  if (node.empty() || current.name.empty()) {
    detail::bump(impl_->ctr_.ignored);
    return false;
  }
  return impl_->pool_.enqueue_pod(node, current.namespace_, current.name);
}

std::size_t controller::run_until_idle_for_test() {
  return impl_->pool_.run_until_idle();
}

bool controller::wait_idle(std::chrono::milliseconds timeout) {
  return impl_->pool_.wait_idle(timeout);
}

std::optional<std::vector<taint>> controller::tainted_taints(std::string_view node) const {
  return impl_->tainted_.lookup(node);
}

controller_stats controller::stats() const {
  controller_stats s;
  const detail::storm_breaker::state breaker = impl_->breaker_.current();
  s.breaker_open = breaker.open;
  s.breaker_tainted_nodes = breaker.tainted_nodes;
  s.nodes = breaker.nodes;
  s.tainted_nodes = impl_->tainted_.size();
  s.stuck_evictions = impl_->runner_.stuck_count();
  s.blocked_evictions = impl_->runner_.blocked_count();
  s.worker_queue_depth = impl_->pool_.depths();
  s.queue = impl_->queue_.stats();
  s.held_evictions = s.queue.deferred[detail::hold_tag];
  s.settling_evictions = s.queue.deferred[detail::settle_tag];
  return s;
}

metrics::table controller::metric_table() const {
  metrics::table t = impl_->ctr_.table;
  const impl* i = impl_.get();
  const auto gauge = [&t](const char* name, const char* help, auto read) {
    t.push_back(metrics::gauge_row(name, help, [read] { return static_cast<double>(read()); }));
  };
  gauge("tainted_nodes", "Nodes that carry at least one NoExecute taint.",
        [i] { return i->tainted_.size(); });
  gauge("stuck_evictions", "Evictions that failed at least 5 times in a row and are still retried.",
        [i] { return i->runner_.stuck_count(); });
  gauge("evictions_waiting",
        "Due evictions the eviction policy holds back (rate limit, in-flight caps, storm "
        "breaker).",
        [i] { return i->queue_.stats().held; });
  gauge("held_evictions",
        "Due evictions waiting for a taint-eviction-controller/hold-until annotation.",
        [i] { return i->queue_.stats().deferred[detail::hold_tag]; });
  gauge("settling_evictions",
        "Due evictions waiting for the storm breaker's settling time (settleSeconds).",
        [i] { return i->queue_.stats().deferred[detail::settle_tag]; });
  gauge("storm_breaker_open", "1 while the storm breaker is open and every eviction waits, else 0.",
        [i] { return i->breaker_.current().open ? 1 : 0; });
  gauge("evictions_blocked",
        "Evictions the Eviction API refuses right now (a PodDisruptionBudget), still retried.",
        [i] { return i->runner_.blocked_count(); });
  return t;
}

void controller::set_policy(const eviction_policy& policy) {
  impl_->apply_policy(policy);
}

void controller::redecide_all() {
  impl_->redecide_all();
}

eviction_policy controller::policy() const {
  return impl_->policy_.copy();
}

bool controller::dry_run() const noexcept {
  return impl_->policy_.dry_run();
}

const timedqueue::timed_queue& controller::queue_for_test() const {
  return impl_->queue_;
}

eviction_list controller::evictions(std::size_t limit) const {
  const timedqueue::queue_snapshot snap = impl_->queue_.snapshot(limit);
  eviction_list out;
  out.total = snap.total;
  out.evictions.reserve(snap.entries.size());
  // Each node's taints are looked up once: a tainted node has many pods.
  std::unordered_map<std::string, std::vector<taint>> taints_of;
  for (const auto& [key, info] : snap.entries) {
    eviction_view v;
    const auto [ns, name] = detail::split_key(key);
    v.pod = pod_ref{std::string(ns), std::string(name), info.payload};
    v.node = info.groups[0];
    auto it = taints_of.find(v.node);
    if (it == taints_of.end()) {
      it = taints_of.emplace(v.node, tainted_taints(v.node).value_or(std::vector<taint>{})).first;
    }
    v.taints = it->second;
    v.due = info.fire_at;
    std::tie(v.state, v.why) = state_of(info);
    if (info.state != timedqueue::entry_state::pending) {
      if (const auto b = impl_->runner_.blocked(key); b && b->generation == info.generation) {
        v.state = "blocked";
        v.why = "pdb";
        v.blocked_since = b->since;
        v.fallback_at = b->fallback_at;
      }
    }
    v.attempts = info.attempts;
    v.last_error = info.last_error;
    out.evictions.push_back(std::move(v));
  }
  return out;
}

}  // namespace tec::controller
