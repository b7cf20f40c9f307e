#pragma once

// The controller's eviction outcomes as eviction history records (eviction_history.hpp):
// the driver's clock mapped onto the wall clock, the taints and the toleration in the API's
// words, the policy's effects as short lines. Pure; any thread.

#include <string>
#include <vector>

#include "tec/base/clock.hpp"
#include "tec/controller/outcome.hpp"
#include "tec/reports/eviction_history.hpp"

namespace tec::reports {

/// The policy effects of `o`, one short line each ([] when none): "taint rule example.com/*
/// raised tolerationSeconds 5 -> 60", "waited 2.1s: rate_limit" (waits of 0.1 s or more),
/// "Evict mode: refused 3 times by a PodDisruptionBudget", "deleted after fallbackAfter 60s".
[[nodiscard]] std::vector<std::string> policy_lines(const controller::eviction_outcome& o);

/// The record of `o`; `clock` maps the driver's clock (its times) onto the wall clock.
[[nodiscard]] history_record history_record_of(const controller::eviction_outcome& o,
                                               const base::clock_bridge& clock);

}  // namespace tec::reports
