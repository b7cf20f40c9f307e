#pragma once

// Shadow mode's parts in the daemon: the tracker, its metrics and the handlers that feed it.

#include <chrono>
#include <optional>

#include "tec/base/clock.hpp"
#include "tec/controller/controller.hpp"
#include "tec/informers/controller_feed.hpp"
#include "tec/informers/informers.hpp"
#include "tec/metrics/metrics.hpp"
#include "tec/shadow/shadow_tracker.hpp"

namespace tec::cmd {

// Shadow mode (--shadow): the comparison (the controller's observer, the pod and Event
// handlers and the sweep feed it; /debug/shadow reads it). Empty without --shadow.
struct shadow_parts {
  base::clock_bridge clock{*base::real_clock()};
  std::optional<metrics::shadow_metrics> metrics;
  std::optional<shadow::shadow_tracker> tracker;

  // Main thread: the comparison over a window; the tracker reads the controller's taints.
  void build(metrics::registry& registry, std::chrono::milliseconds window,
             const controller::controller& ctrl);

  // Main thread, after build(): `forward` and then, while `feed` is active (we lead and the
  // caches are synced, as decisions are made), the comparison.
  informers::pod_informer::handler compare_pods(const informers::controller_feed& feed,
                                                informers::pod_informer::handler forward);

  // I/O thread (the sweep job): settles the due pods.
  void sweep();
};

}  // namespace tec::cmd
