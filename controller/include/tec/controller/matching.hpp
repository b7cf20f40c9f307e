#pragma once

// Toleration matching with Kubernetes API semantics, and the "how long may this pod stay"
// computation the taint manager makes from it. Pure functions: no state, no I/O, callable from
// any thread.

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "tec/controller/model.hpp"
#include "tec/controller/policy.hpp"

namespace tec::controller {

/// True when `tol` tolerates `t`:
/// - the toleration's effect is empty or equal to the taint's;
/// - its key equals the taint's key, or is empty with operator Exists (matches every key).
///   An empty key with any other operator is invalid in the API (validation rejects it) and
///   tolerates nothing here;
/// - Exists tolerates any value; Equal (the default) compares values as strings;
///   Lt/Gt parse both values as upstream does (strconv.ParseInt(value, 10, 64): "007" and
///   "+7" are 7; k/k#134665) and tolerate when taint value < (Lt) or > (Gt) the toleration
///   value; a value that does not parse tolerates nothing; an unknown operator tolerates
///   nothing.
[[nodiscard]] bool tolerates(const toleration& tol, const taint& t) noexcept;

/// Parses a base-10 int64 as Go's strconv.ParseInt(text, 10, 64) does: an optional '+' or
/// '-', then decimal digits (leading zeros allowed), in range; nothing else.
[[nodiscard]] std::optional<std::int64_t> parse_int64(std::string_view text) noexcept;

/// How long a pod may keep running on a node whose taints it tolerates.
struct toleration_time {
  enum class kind : std::uint8_t {
    now,      ///< Evict at once.
    after,    ///< Evict after `seconds` (> 0).
    forever,  ///< Never evict.
  };
  kind what = kind::now;
  std::chrono::seconds seconds{0};  ///< Meaningful for kind::after only.

  [[nodiscard]] static toleration_time immediately() { return {kind::now, {}}; }
  [[nodiscard]] static toleration_time never() { return {kind::forever, {}}; }
  [[nodiscard]] static toleration_time after_seconds(std::int64_t s) {
    return {kind::after, std::chrono::seconds(s)};
  }

  [[nodiscard]] bool is_now() const { return what == kind::now; }
  [[nodiscard]] bool is_forever() const { return what == kind::forever; }

  /// The delay to add to `now` for kind::now / kind::after, saturated at max_delay so that
  /// `now + delay()` never overflows (upstream multiplies seconds by 1e9 in int64, wraps to a
  /// negative duration and evicts at once; we never turn a huge value into "now").
  /// Must not be called for kind::forever.
  [[nodiscard]] std::chrono::nanoseconds delay() const;

  /// 100 years: far past the lifetime of any process, far below the clock's overflow.
  static constexpr std::chrono::nanoseconds max_delay =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::hours(24 * 365 * 100));

  friend bool operator==(const toleration_time&, const toleration_time&) = default;
};

/// What a pod on a node with these NoExecute taints needs.
struct pod_decision {
  /// Some taint is not tolerated: cancel any scheduled eviction and evict now.
  bool untolerated = false;
  /// When !untolerated: how long the pod may stay (min over the used tolerations).
  toleration_time time;
};

/// The outcome of decide(): what the pod needs, and what the policy's taint rules did to it.
struct ruled_decision {
  pod_decision decision;
  /// Every taint was ignored: the pod is left alone as on an untainted node (`decision` is
  /// "forever").
  bool all_ignored = false;
  /// A rule changed the time of some taint from what the pod's tolerations gave: the first
  /// such taint and its rule (for the log line); null when nothing changed.
  const taint* overridden = nullptr;
  const taint_rule* rule = nullptr;
};

/// For each taint, the first toleration in list order that tolerates it (upstream
/// getMatchingTolerations), then the minimum toleration time over those (upstream
/// getMinTolerationTime: any tolerationSeconds <= 0 -> now; all unset -> forever; else the
/// smallest positive value, INT64_MAX seconds included: see toleration_time::delay()), in one
/// pass, without allocating. `taints` must not be empty. With the policy's taint `rules`
/// (policy.hpp taint_rule; the first rule whose key matches a taint applies to it; none:
/// upstream's decision):
/// - a taint whose rule says Ignore is left out, as if the node did not carry it;
/// - for the others, the time the pod gets for that taint is its toleration's, then raised to
///   the rule's floor (min_toleration_seconds; a taint the pod does not tolerate, or tolerates
///   for <= 0 s, gets the floor too) and lowered to its cap (max_toleration_seconds; a
///   toleration without tolerationSeconds is not capped).
[[nodiscard]] ruled_decision decide(std::span<const taint> taints,
                                    std::span<const toleration> tolerations,
                                    std::span<const taint_rule> rules) noexcept;

/// Evict mode (eviction_policy::mode): how long an eviction a disruption budget refuses may
/// wait before the pod is deleted anyway. Over the `taints` that evict the pod (no rule ignores
/// them, and the pod does not tolerate them forever), each one's rule's fallback_after, or
/// `global` when its rule sets none; the shortest that is not zero. Zero: never (no such taint,
/// or every one says never).
[[nodiscard]] std::chrono::milliseconds fallback_after(std::span<const taint> taints,
                                                       std::span<const toleration> tolerations,
                                                       std::span<const taint_rule> rules,
                                                       std::chrono::milliseconds global) noexcept;

/// The taints among `taints` that make an eviction of a pod with `tolerations` right: those no
/// rule of `rules` ignores and the pod does not tolerate forever (decide() on each taint
/// alone: untolerated, or tolerated for a finite time). What the eviction sink confirms on a
/// fresh read of the node before it deletes (eviction_request::causes). Allocates.
[[nodiscard]] std::vector<taint> evicting_taints(std::span<const taint> taints,
                                                 std::span<const toleration> tolerations,
                                                 std::span<const taint_rule> rules);

/// The value of label `key` in `labels` (pod_view::labels: "k=v" lines), or nullopt.
[[nodiscard]] std::optional<std::string_view> label_value(std::string_view labels,
                                                          std::string_view key) noexcept;

/// True when `selector` selects a pod with `labels`. An empty selector selects nothing.
[[nodiscard]] bool selects(const label_selector& selector, std::string_view labels) noexcept;

/// Where a countdown that started before this process acted began (see countdown_since).
struct countdown {
  /// When it started, seconds since the Unix epoch.
  std::int64_t start_unix = 0;
  /// How long the pod may stay, counted from start_unix (never kind::forever).
  toleration_time time;
  /// The taint whose arrival started it (the last one of the taints present then).
  const taint* started_by = nullptr;
};

/// When a controller starts acting (a restart, a leader failover) and finds a pod on a node
/// whose NoExecute `taints` it tolerates for a while (decide() says neither untolerated nor
/// forever): when an uninterrupted controller would have started the pod's countdown, and for
/// how long. Each taint counts from max(its timeAdded, the pod's bind time `bound_unix`),
/// clamped to `now_unix`; a taint without timeAdded (kubectl taint sets none) counts from now.
/// Walking the taints in that order, the countdown starts at the first time the taints
/// present make the pod's stay finite, and lasts what they allowed then: a taint that came
/// later does not move it (an uninterrupted controller keeps a scheduled eviction's time).
/// nullopt when the taints, so placed, leave the stay forever (not for a valid input: the
/// whole set is finite). The time is computed with `rules` (see ruled_decision). Allocates;
/// called only when the controller starts acting.
[[nodiscard]] std::optional<countdown> countdown_since(std::span<const taint> taints,
                                                       std::span<const toleration> tolerations,
                                                       std::int64_t bound_unix,
                                                       std::int64_t now_unix,
                                                       std::span<const taint_rule> rules = {});

}  // namespace tec::controller
