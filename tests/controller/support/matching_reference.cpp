#include "controller/support/matching_reference.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>

namespace tec::controller::testing {

match_result matching_tolerations(std::span<const taint> taints,
                                  std::span<const toleration> tolerations) {
  match_result result;
  result.used.reserve(taints.size());
  for (const taint& t : taints) {
    const auto it = std::find_if(tolerations.begin(), tolerations.end(),
                                 [&](const toleration& tol) { return tolerates(tol, t); });
    if (it == tolerations.end()) {
      result.all_tolerated = false;
      result.used.clear();
      return result;
    }
    result.used.push_back(&*it);
  }
  return result;
}

namespace {

template <class Range, class Get>
toleration_time min_over(const Range& used, Get get) {
  std::optional<std::int64_t> min_seconds;
  for (const auto& item : used) {
    const toleration& tol = get(item);
    if (!tol.seconds) {
      continue;
    }
    if (*tol.seconds <= 0) {
      return toleration_time::immediately();
    }
    if (!min_seconds || *tol.seconds < *min_seconds) {
      min_seconds = *tol.seconds;
    }
  }
  if (used.empty()) {
    return toleration_time::immediately();
  }
  return min_seconds ? toleration_time::after_seconds(*min_seconds) : toleration_time::never();
}

}  // namespace

toleration_time min_toleration_time(std::span<const toleration* const> used) {
  return min_over(used, [](const toleration* tol) -> const toleration& { return *tol; });
}

toleration_time min_toleration_time(std::span<const toleration> used) {
  return min_over(used, [](const toleration& tol) -> const toleration& { return tol; });
}

}  // namespace tec::controller::testing
