#pragma once

// The daemon's /metrics: the families it updates itself (metrics::register_standard_metrics)
// and the tables the libraries publish, each counter declared beside its counting.

#include <vector>

#include "tec/controller/controller.hpp"
#include "tec/informers/informers.hpp"
#include "tec/metrics/metrics.hpp"
#include "tec/writers/event_recorder.hpp"
#include "tec/writers/eviction_sink.hpp"

namespace tec::cmd {

/// What publish_metric_set() reads: borrowed, they must outlive the registry's renders.
struct metric_sources {
  const controller::controller& ctrl;
  const writers::k8s_eviction_sink& sink;
  const writers::event_recorder& recorder;
  /// The informers, labelled by resource ("pods", "nodes", "namespaces").
  std::vector<informers::watched_resource> watched;
};

/// Publishes the libraries' tables in `r` (once per registry): the controller's first, which
/// declares dry_run_pod_deletions_total, then the sink's (which adds to it), the event
/// recorder's and the informers'. Throws std::invalid_argument if a name is taken.
void publish_metric_set(metrics::registry& r, metric_sources sources);

}  // namespace tec::cmd
