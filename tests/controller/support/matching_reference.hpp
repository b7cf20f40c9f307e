#pragma once

// The two-pass form of the taint manager's decision, as upstream writes it
// (getMatchingTolerations, then getMinTolerationTime): the reference the tests check the
// controller's one-pass decide() (tec/controller/matching.hpp) against. Test-only.

#include <span>
#include <vector>

#include "tec/controller/matching.hpp"
#include "tec/controller/model.hpp"

namespace tec::controller::testing {

/// The tolerations used for a list of taints.
struct match_result {
  /// False when at least one taint is not tolerated by any toleration.
  bool all_tolerated = true;
  /// When all_tolerated: one entry per taint, in taint order, pointing into the toleration
  /// list given to matching_tolerations (the first toleration, in list order, that tolerates
  /// that taint). Empty when !all_tolerated. Valid as long as that list is.
  std::vector<const toleration*> used;
};

/// For each taint, the first toleration in list order that tolerates it.
[[nodiscard]] match_result matching_tolerations(std::span<const taint> taints,
                                                std::span<const toleration> tolerations);

/// The minimum toleration time over the used tolerations (upstream getMinTolerationTime):
/// empty list -> now; any tolerationSeconds <= 0 -> now; all unset -> forever; else the
/// smallest positive value (INT64_MAX seconds included: see toleration_time::delay()).
[[nodiscard]] toleration_time min_toleration_time(std::span<const toleration* const> used);
/// Same, over tolerations by value.
[[nodiscard]] toleration_time min_toleration_time(std::span<const toleration> used);

}  // namespace tec::controller::testing
