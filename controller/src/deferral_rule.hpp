#pragma once

// The one rule for how long an eviction waits past its own time (README "Holds" and "Storm
// breaker"): the hold in force, cut at maxHold past the eviction's own time, and the storm
// breaker's settling time of the taints that cause it, whichever ends later. The controller
// (deferrals.cpp, on the driver's clock) and the preview (preview.cpp, in whole seconds) both
// call it, so the preview says what the controller does. Pure: no state, no clock.

#include "tec/controller/matching.hpp"
#include "tec/controller/model.hpp"
#include "tec/controller/policy.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tec::controller::detail {

/// Times in the rule: offsets from now.
using wait_duration = std::chrono::nanoseconds;

/// The taints among a node's NoExecute `taints` that cause the eviction of a pod with
/// `tolerations` under the taint `rules` (those evicting_taints() returns) and that the storm
/// breaker's settling counts: `settle_keys` lists their keys (empty: every key).
[[nodiscard]] std::vector<taint> settling_causes(std::span<const taint> taints,
                                                 std::span<const toleration> tolerations,
                                                 std::span<const taint_rule> rules,
                                                 std::span<const std::string> settle_keys);

struct deferral_input {
  wait_duration own{};                     ///< The eviction's own time (0: now).
  std::optional<wait_duration> hold_left;  ///< When the hold in force ends; none: no hold.
  wait_duration max_hold{};                ///< The policy's maxHold.
  wait_duration settle{};                  ///< stormBreaker.settleSeconds; 0: no settling.
  /// How old each settling cause is (settling_causes(); a cause whose age is unknown and that
  /// is taken as settled is left out). A negative age counts as 0.
  std::span<const wait_duration> cause_ages;
};

struct deferral_verdict {
  enum class reason : std::uint8_t { none, hold, settle };
  reason why = reason::none;  ///< What sets `wait`: the later of the two.
  wait_duration wait{};       ///< When the eviction goes instead of `own` (later), unless none.
  /// When the hold lets it go, when that is later than `own` (also when settling ends later).
  std::optional<wait_duration> held;
  bool cut = false;  ///< The hold ends later than own + maxHold, so `held` is cut there.
};

/// The later of the hold's end (cut at own + maxHold) and each cause's settling end (its age
/// counted up to settle), when that is later than `own`; on a tie the hold.
[[nodiscard]] deferral_verdict defer(const deferral_input& in);

}  // namespace tec::controller::detail
