#include "storm_breaker.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace tec::controller::detail {

storm_breaker::storm_breaker(
    timedqueue::timed_queue& queue,
    std::function<void(bool open, std::size_t tainted, std::size_t nodes)> on_change,
    std::shared_ptr<spdlog::logger> log)
    : queue_(queue), on_change_(std::move(on_change)), log_(std::move(log)) {}

void storm_breaker::configure(const storm_breaker_policy& cfg, const tainted_nodes& tainted) {
  bool changed_state = false;
  {
    std::lock_guard lock(mu_);
    const bool recount = cfg_.taint_keys != cfg.taint_keys;
    const bool cfg_changed = !(cfg_ == cfg);
    cfg_ = cfg;
    if (recount) {
      // Which taints count changed: recount from the tainted table.
      tainted_.clear();
      for (std::size_t i = 0; i < tainted.shard_count(); ++i) {
        tainted.for_each_in(i, [&](const std::string& node, const std::vector<taint>& taints) {
          if (counts(taints) && nodes_.contains(node)) {
            tainted_.insert(node);
          }
        });
      }
    }
    changed_state = evaluate(/*fresh=*/cfg_changed);
  }
  if (changed_state) {
    changed();
  }
}

void storm_breaker::node_updated(const node_view* old_node, const node_view* new_node) {
  bool changed_state = false;
  {
    std::lock_guard lock(mu_);
    const node_view& n = new_node != nullptr ? *new_node : *old_node;
    if (new_node == nullptr) {
      nodes_.erase(n.name);
      tainted_.erase(n.name);
    } else {
      if (old_node == nullptr) {
        nodes_.insert(n.name);
      }
      if (counts(n.taints) && nodes_.contains(n.name)) {
        tainted_.insert(n.name);
      } else {
        tainted_.erase(n.name);
      }
    }
    changed_state = evaluate();
  }
  if (changed_state) {
    changed();
  }
}

storm_breaker::state storm_breaker::current() const {
  std::lock_guard lock(mu_);
  return state{open_, tainted_.size(), nodes_.size()};
}

// Whether `taints` (all of a node's taints) hold a NoExecute taint the breaker counts.
// Requires mu_.
bool storm_breaker::counts(const std::vector<taint>& taints) const {
  for (const taint& t : taints) {
    if (t.effect != taint_effect::no_execute) {
      continue;
    }
    if (cfg_.taint_keys.empty() ||
        std::find(cfg_.taint_keys.begin(), cfg_.taint_keys.end(), t.key) != cfg_.taint_keys.end()) {
      return true;
    }
  }
  return false;
}

// Opens above the threshold (with at least min_tainted_nodes), closes below the threshold
// minus the hysteresis. `fresh` (a new policy): decides as if closed. Returns whether the
// state changed; the queue is then paused or resumed. Requires mu_.
bool storm_breaker::evaluate(bool fresh) {
  bool want = false;
  if (cfg_.enabled()) {
    const double share = nodes_.empty() ? 0.0
                                        : 100.0 * static_cast<double>(tainted_.size()) /
                                              static_cast<double>(nodes_.size());
    if (!open_ || fresh) {
      want = share > cfg_.max_tainted_nodes_percent && tainted_.size() >= cfg_.min_tainted_nodes;
    } else {
      want = share >= cfg_.max_tainted_nodes_percent - cfg_.hysteresis_percent;
    }
  }
  if (want == open_) {
    return false;
  }
  open_ = want;
  queue_.set_paused(open_);
  return true;
}

// Logs the state it just changed to and tells on_change_. Outside the lock (reads it again).
void storm_breaker::changed() {
  const state s = current();
  if (s.open) {
    log_->warn(
        "storm breaker OPEN: {} of {} nodes carry NoExecute taints; every eviction waits "
        "until the share falls or the policy is changed ({} held)",
        s.tainted_nodes, s.nodes, queue_.stats().held);
  } else {
    log_->warn("storm breaker closed: {} of {} nodes tainted; held evictions resume",
               s.tainted_nodes, s.nodes);
  }
  if (on_change_) {
    on_change_(s.open, s.tainted_nodes, s.nodes);
  }
}

}  // namespace tec::controller::detail
