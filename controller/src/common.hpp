#pragma once

// What the controller's parts share: the counters, pod keys ("namespace/name"), tables searched
// by string_view, and the timestamps of the trace-level stage lines.

#include "tec/controller/controller.hpp"

#include <atomic>
#include <utility>

namespace tec::controller::detail {

/// The controller's counters: each part bumps its own (relaxed), controller::stats() reads them
/// all, from any thread. Owned by controller::impl, borrowed by the parts.
struct counters {
  std::atomic<std::uint64_t> node_updates{0};
  std::atomic<std::uint64_t> pod_updates{0};
  std::atomic<std::uint64_t> ignored{0};
  std::atomic<std::uint64_t> coalesced{0};
  std::atomic<std::uint64_t> decisions{0};
  std::atomic<std::uint64_t> scheduled{0};
  std::atomic<std::uint64_t> started{0};
  std::atomic<std::uint64_t> attempts{0};
  std::atomic<std::uint64_t> succeeded{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> skipped{0};
  std::atomic<std::uint64_t> terminating{0};
  std::atomic<std::uint64_t> cancellations{0};
  std::atomic<std::uint64_t> stale{0};
  std::atomic<std::uint64_t> dry_run{0};
  std::atomic<std::uint64_t> from_taint_time{0};
  std::array<std::atomic<std::uint64_t>, skip_reason_count> skipped_by{};
  std::atomic<std::uint64_t> overrides{0};
  std::atomic<std::uint64_t> fallbacks{0};
  std::atomic<std::uint64_t> blocked{0};
};

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
