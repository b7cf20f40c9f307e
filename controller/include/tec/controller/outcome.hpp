#pragma once

// What an eviction came to: one eviction_outcome per queue entry that ends (the pod deleted or
// evicted, dry-run's "would delete", the pod found gone or replaced, the eviction cancelled),
// for the eviction history (controller_options::on_outcome). Plain data, no I/O.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/controller/model.hpp"
#include "tec/controller/ports.hpp"
#include "tec/timedqueue/timed_queue.hpp"

namespace tec::controller {

/// How a queue entry ended.
enum class outcome_result : std::uint8_t {
  deleted,                 ///< Our DELETE was accepted.
  evicted,                 ///< Evict mode: the Eviction API accepted it.
  deleted_after_fallback,  ///< Evict mode: refused for fallbackAfter, then deleted.
  would_delete,            ///< Dry-run: it would have deleted the pod.
  pod_gone,                ///< The pod was deleted or became terminating before we did it.
  replaced,                ///< The name now belongs to another pod (another UID).
  cancelled_untainted,     ///< The node lost its taints, or the pod now tolerates them.
};

/// "deleted", "evicted", "deleted_after_fallback", "would_delete", "pod_gone", "replaced",
/// "cancelled_untainted" (the history record's `result`).
[[nodiscard]] std::string_view to_string(outcome_result result) noexcept;

/// A taint rule of the policy that set the eviction's time (its floor or its cap).
struct rule_effect {
  std::string rule;  ///< The rule's key as the file writes it ("example.com/*").
  /// The pod's own tolerationSeconds for that taint; nullopt: it did not tolerate it.
  std::optional<std::int64_t> own_seconds;
  std::int64_t seconds = 0;  ///< The tolerationSeconds the eviction was scheduled with.
};

/// One ended eviction. Times are on the driver's clock (map them with a base::clock_bridge).
struct eviction_outcome {
  pod_ref pod;                ///< The pod (its UID: the one the eviction was made for).
  std::string node;           ///< Its node when the eviction was scheduled.
  std::vector<taint> taints;  ///< That node's NoExecute taints then.
  /// The toleration that set the eviction's time and the taint it matched; nullopt when the
  /// pod was evicted at once for a taint it does not tolerate.
  std::optional<toleration> used;
  std::optional<taint> matched;
  timedqueue::time_point scheduled_at{};  ///< When its countdown started (the replay may set
                                          ///< it back to the taint's time).
  timedqueue::time_point due{};           ///< When it was due.
  timedqueue::time_point done{};          ///< When it ended.
  std::uint32_t attempts = 0;             ///< Attempts started.
  std::optional<rule_effect> rule;        ///< A taint rule's floor or cap set its time.
  /// How long its deferral made it wait after it was due (all attempts), and which deferral
  /// the last such wait was for ("hold": a hold-until annotation, "settling": the storm
  /// breaker's settling time; "" when it did not wait for one).
  std::chrono::nanoseconds deferred{0};
  std::string deferred_why;
  /// How long admission control held it after it was due or its deferral ended (all
  /// attempts), and why the last hold was ("rate_limit", "in_flight_limit_node",
  /// "storm_breaker", ... as eviction_view::why names them; "" when it did not wait or the
  /// queue did not say).
  std::chrono::nanoseconds waited{0};
  std::string waited_why;
  /// Evict mode: attempts a disruption budget refused, and the fallbackAfter that then applied
  /// (0: none).
  std::uint32_t refusals = 0;
  std::chrono::milliseconds fallback_after{0};
  outcome_result result = outcome_result::deleted;
  std::string last_error;  ///< The last failed attempt's error, as the API gave it; or "".
};

}  // namespace tec::controller
