#pragma once

// The eviction policy an operator configures (the EvictionPolicy file, see README "Policy"),
// as the controller uses it: plain values, already validated. A default-constructed policy is
// "no policy": exactly upstream's behaviour.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tec::controller {

/// Limits on how fast evictions are issued (0 = unlimited, for each field).
struct rate_limit_policy {
  /// Evictions started per second, cluster-wide (a token bucket on the controller's clock,
  /// separate from the API client's QPS).
  double evictions_per_second = 0;
  /// Evictions that may start at once after a quiet period; 0 = max(1, ceil(evictions_per_second)).
  std::uint32_t burst = 0;
  /// Evictions in flight (started, not yet finished) per node and per namespace.
  std::uint32_t max_in_flight_per_node = 0;
  std::uint32_t max_in_flight_per_namespace = 0;

  [[nodiscard]] bool unlimited() const {
    return evictions_per_second <= 0 && max_in_flight_per_node == 0 &&
           max_in_flight_per_namespace == 0;
  }
  friend bool operator==(const rate_limit_policy&, const rate_limit_policy&) = default;
};

/// Pauses every eviction while too many nodes carry NoExecute taints.
struct storm_breaker_policy {
  /// Opens when more than this share of nodes (0-100) is tainted; 0 = off.
  double max_tainted_nodes_percent = 0;
  /// ... and at least this many nodes are.
  std::uint32_t min_tainted_nodes = 0;
  /// Closes again below max_tainted_nodes_percent - hysteresis_percent.
  double hysteresis_percent = 0;
  /// Only NoExecute taints with these keys count (exact keys); empty = every NoExecute taint.
  std::vector<std::string> taint_keys;

  [[nodiscard]] bool enabled() const { return max_tainted_nodes_percent > 0; }
  friend bool operator==(const storm_breaker_policy&, const storm_breaker_policy&) = default;
};

struct eviction_policy {
  /// Decide everything, write nothing: "would delete" in the logs, decisions in the metrics.
  bool dry_run = false;
  rate_limit_policy rate_limit;
  storm_breaker_policy storm_breaker;

  friend bool operator==(const eviction_policy&, const eviction_policy&) = default;
};

}  // namespace tec::controller
