#pragma once

#include "tec/controller/matching.hpp"
#include "tec/controller/policy.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace tec::controller::detail {

/// The policy in force (set_policy() replaces it), and what the hot paths read of it: the
/// flags without a lock, the scoping rules as one shared snapshot. Thread-safe: its mutex
/// guards the policy and the snapshot.
class policy_state {
public:
  /// Replaces the policy. Returns true when its exclude or taints rules changed (every pod on
  /// a tainted node is to be decided again).
  bool replace(const eviction_policy& p) {
    bool rescope = false;
    {
      std::lock_guard lock(mu_);
      rescope = !(policy_.exclude == p.exclude) || policy_.taints != p.taints;
      policy_ = p;
      const bool scoped = !p.exclude.empty() || !p.taints.empty();
      scope_ = scoped ? std::make_shared<const eviction_policy>(p) : nullptr;
      scoped_.store(scoped, std::memory_order_release);
    }
    settle_ms_.store(p.storm_breaker.enabled() ? std::int64_t{p.storm_breaker.settle_seconds} * 1000
                                               : 0);
    max_hold_ms_.store(p.max_hold.count());
    dry_run_.store(p.dry_run);
    evict_mode_.store(p.mode == eviction_mode::evict);
    return rescope;
  }

  [[nodiscard]] eviction_policy copy() const {
    std::lock_guard lock(mu_);
    return policy_;
  }

  /// The policy when it has exclude or taints rules (what a decision reads), else null.
  [[nodiscard]] std::shared_ptr<const eviction_policy> scope() const {
    if (!scoped_.load(std::memory_order_acquire)) {
      return nullptr;
    }
    std::lock_guard lock(mu_);
    return scope_;
  }
  /// Whether scope() is set, without the lock (the intake filter: labels, phase and owner
  /// matter only then).
  [[nodiscard]] bool scoped() const { return scoped_.load(std::memory_order_relaxed); }
  [[nodiscard]] bool dry_run() const { return dry_run_.load(std::memory_order_relaxed); }
  /// eviction_policy::mode is evict.
  [[nodiscard]] bool evict_mode() const { return evict_mode_.load(std::memory_order_relaxed); }

  /// The storm breaker's settling time, zero when it is off or the breaker is disabled.
  [[nodiscard]] std::chrono::milliseconds settle() const {
    return std::chrono::milliseconds(settle_ms_.load(std::memory_order_relaxed));
  }
  /// The storm breaker's taintKeys (empty: every key), a copy.
  [[nodiscard]] std::vector<std::string> settle_keys() const {
    std::lock_guard lock(mu_);
    return policy_.storm_breaker.taint_keys;
  }
  /// eviction_policy::max_hold.
  [[nodiscard]] std::chrono::milliseconds max_hold() const {
    return std::chrono::milliseconds(max_hold_ms_.load(std::memory_order_relaxed));
  }

  /// Evict mode: the fallbackAfter that applies to a pod with `tolerations` on a node with
  /// the NoExecute `taints` (see controller::fallback_after()).
  [[nodiscard]] std::chrono::milliseconds fallback_for(
      const std::vector<taint>& taints, const std::vector<toleration>& tolerations) const {
    std::lock_guard lock(mu_);
    return fallback_after(taints, tolerations, policy_.taints, policy_.fallback_after);
  }

  /// The taints among `taints` that make an eviction of a pod with `tolerations` right, under
  /// the policy's taint rules (see controller::evicting_taints()).
  [[nodiscard]] std::vector<taint> evicting_taints(
      const std::vector<taint>& taints, const std::vector<toleration>& tolerations) const {
    std::lock_guard lock(mu_);
    return ::tec::controller::evicting_taints(taints, tolerations, policy_.taints);
  }

private:
  mutable std::mutex mu_;
  eviction_policy policy_;
  std::shared_ptr<const eviction_policy> scope_;
  std::atomic<bool> scoped_{false};  // scope_ is set; read without the lock
  std::atomic<std::int64_t> settle_ms_{0};
  std::atomic<std::int64_t> max_hold_ms_{
      std::chrono::milliseconds(eviction_policy{}.max_hold).count()};
  std::atomic<bool> dry_run_{false};
  std::atomic<bool> evict_mode_{false};
};

}  // namespace tec::controller::detail
