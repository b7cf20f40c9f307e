#pragma once

// What the controller's parts share: the counters, pod keys ("namespace/name"), tables searched
// by string_view, and the timestamps of the trace-level stage lines.

#include "tec/controller/controller.hpp"
#include "tec/metrics/table.hpp"

#include <array>
#include <atomic>
#include <utility>

namespace tec::controller::detail {

/// The controller's counters, each declared with its metric (metrics/table.hpp): each part
/// bumps its own, `table` publishes them all (controller::metric_table() adds the gauges).
/// Owned by controller::impl, borrowed by the parts; inc() from any thread. A new counter is a
/// member here and its inc() where it happens.
struct counters {
  counters();
  counters(const counters&) = delete;
  counters& operator=(const counters&) = delete;

  metrics::table table;  // first: the members below add their rows to it
  metrics::count node_updates{table, "node_updates_total",
                              "Node updates taken in (queued for a worker or merged into one "
                              "waiting)."};
  metrics::count pod_updates{table, "pod_updates_total",
                             "Pod updates taken in (queued for a worker or merged into one "
                             "waiting)."};
  metrics::count ignored{table, "updates_ignored_total",
                         "Node and pod updates ignored: nothing that decides an eviction "
                         "changed."};
  metrics::count coalesced{table, "updates_coalesced_total",
                           "Node and pod updates merged into one already waiting."};
  metrics::count decisions{table, "pod_decisions_total", "Pods decided on a tainted node."};
  metrics::count scheduled{table, "scheduled_evictions_total", "Pod evictions scheduled."};
  metrics::count started{table, "evictions_started_total",
                         "Evictions started (their first deletion attempt)."};
  metrics::count retries{table, "pod_deletion_retries_total", "Pod deletion attempts retried."};
  metrics::count succeeded{table, "evictions_succeeded_total",
                           "Evictions done: the pod was deleted (or evicted), or was gone."};
  metrics::count failed{table, "eviction_attempt_failures_total",
                        "Eviction attempts that failed (each is retried)."};
  metrics::count skipped{table, "evictions_skipped_total",
                         "Evictions that fired for a pod gone or replaced: no API call."};
  metrics::count terminating{
      table, "terminating_pods_skipped_total",
      "Evictions not made because the pod was already terminating (a deletionTimestamp): no "
      "DELETE, no rate-limit token, no Marking event."};
  metrics::count cancellations{table, "cancelled_evictions_total",
                               "Scheduled pod evictions cancelled before they ran."};
  metrics::count stale{table, "stale_evictions_dropped_total",
                       "Evictions dropped because the pod of that name has another UID."};
  metrics::count dry_run{table, "dry_run_pod_deletions_total",
                         "Pods the controller would have deleted, had dry-run been off."};
  metrics::count from_taint_time{
      table, "deadlines_from_taint_time_total",
      "Evictions scheduled when this process started acting whose countdown was counted from "
      "the taint's timeAdded (or the pod's bind time) rather than from now."};
  metrics::count overrides{table, "toleration_overrides_total",
                           "Evictions scheduled with a time a taint rule's minTolerationSeconds "
                           "or maxTolerationSeconds set instead of the pod's own toleration."};
  metrics::count fallbacks{table, "eviction_fallbacks_total",
                           "Pods deleted after their eviction was refused for fallbackAfter."};
  metrics::count stuck_reports{table, "stuck_reports_total",
                               "Stuck reports (a warning and a TaintEvictionFailed Event): an "
                               "eviction failed 5 times in a row, and again while it stays stuck."};
  metrics::count blocked{table, "eviction_refusals_total",
                         "Eviction API calls refused (429: a PodDisruptionBudget) and retried."};
  /// pods_skipped_total{reason}, by skip_reason (its row added by the constructor).
  std::array<std::atomic<std::uint64_t>, skip_reason_count> skipped_by{};
};

inline void bump(metrics::count& c) {
  c.inc();
}
inline void bump(std::atomic<std::uint64_t>& c) {
  c.fetch_add(1, std::memory_order_relaxed);
}

// Lets the tables keyed by name (tainted nodes, stuck and blocked evictions) be searched by
// string_view.
struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

// Makes `key` the pod key "namespace/name" (reusing its buffer).
inline void set_key(std::string& key, std::string_view ns, std::string_view name) {
  key.assign(ns).push_back('/');
  key.append(name);
}

// A pod key's namespace and name; no '/': an empty namespace and the whole key.
inline std::pair<std::string_view, std::string_view> split_key(std::string_view key) {
  const auto slash = key.find('/');
  if (slash == std::string_view::npos) {
    return {std::string_view{}, key};
  }
  return {key.substr(0, slash), key.substr(slash + 1)};
}

/// The deferral tags of the controller's queue entries (timedqueue::deferral::tag).
inline constexpr std::uint8_t hold_tag = 1;    ///< A hold-until annotation.
inline constexpr std::uint8_t settle_tag = 2;  ///< The storm breaker's settling time.

/// Why a due entry waits, as eviction_view::why names it: "hold" or "settling" (deferred, by
/// `tag`: hold_tag or settle_tag), "storm_breaker" (only the storm breaker pauses the queue),
/// "in_flight_limit_node" or "in_flight_limit_namespace" (group_limit by `group`: the group
/// classes are {node, namespace}: queue_entries::schedule), else "rate_limit".
inline std::string_view why_held(timedqueue::hold_reason hold, std::uint8_t group,
                                 std::uint8_t tag = 0) {
  switch (hold) {
    case timedqueue::hold_reason::deferred:
      return tag == hold_tag ? "hold" : "settling";
    case timedqueue::hold_reason::paused:
      return "storm_breaker";
    case timedqueue::hold_reason::group_limit:
      return group == 0 ? "in_flight_limit_node" : "in_flight_limit_namespace";
    case timedqueue::hold_reason::rate_limit:
    case timedqueue::hold_reason::none:
      break;
  }
  return "rate_limit";
}

/// The steady clock in microseconds (CLOCK_MONOTONIC: comparable between the processes of one
/// machine), for the trace-level stage lines of a single eviction's latency (issue 16).
inline long long trace_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace tec::controller::detail
