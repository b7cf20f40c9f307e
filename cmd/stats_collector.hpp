#pragma once

// The libraries count (controller, eviction sink, informers, event recorder); the scrape-time
// metrics (metrics::register_standard_metrics) read those counts at each scrape through
// collect_stats(). Nothing is copied between scrapes.

#include <string>

#include "tec/controller/controller.hpp"
#include "tec/k8sclient/reflector.hpp"
#include "tec/metrics/metrics.hpp"
#include "tec/writers/event_recorder.hpp"
#include "tec/writers/eviction_sink.hpp"

namespace tec::cmd {

/// The libraries' own totals as the scrape-time metrics: retries are attempts after the
/// first, watch_restarts/relists/watch_decode_errors carry "pods" and "nodes", events every
/// result of writers::event_recorder_stats. A pure function, called at every scrape with fresh
/// stats.
metrics::scrape_stats collect_stats(const controller::controller_stats& cs,
                                    const writers::eviction_sink_stats& ss,
                                    const k8sclient::reflector_stats& pods,
                                    const k8sclient::reflector_stats& nodes,
                                    const writers::event_recorder_stats& es);

/// Adds another informer's watch_restarts, relists, list_watch_backoffs and watch_decode_errors
/// to `out`, labelled
/// `resource` (e.g. "namespaces").
void add_informer_stats(metrics::scrape_stats& out, const std::string& resource,
                        const k8sclient::reflector_stats& stats);

}  // namespace tec::cmd
