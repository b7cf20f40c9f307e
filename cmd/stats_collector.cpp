#include "stats_collector.hpp"

namespace tec::cmd {

metrics::scrape_stats collect_stats(const controller::controller_stats& cs,
                                    const writers::eviction_sink_stats& ss,
                                    const k8sclient::reflector_stats& pods,
                                    const k8sclient::reflector_stats& nodes,
                                    const writers::event_recorder_stats& es) {
  metrics::scrape_stats out;
  out.pod_deletions = ss.deletions + ss.evictions;
  out.pod_evictions = ss.evictions;
  out.eviction_refusals = cs.blocked_attempts;
  out.evictions_blocked = cs.blocked_evictions;
  out.eviction_fallbacks = cs.eviction_fallbacks;
  out.scheduled_evictions = cs.evictions_scheduled;
  out.cancelled_evictions = cs.cancellations;
  // Read one after the other, attempts may lag first attempts: the registry keeps the exposed
  // counter from going down (register_standard_metrics).
  out.pod_deletion_retries =
      cs.eviction_attempts > cs.evictions_started ? cs.eviction_attempts - cs.evictions_started : 0;
  out.pod_deletion_failures = ss.failures_by_reason;
  out.disruption_condition_failures = ss.condition_failures_by_reason;
  out.fresh_node_checks = ss.fresh_node_checks;
  out.fresh_node_reads = ss.fresh_node_reads;
  out.tainted_nodes = cs.tainted_nodes;
  out.stuck_evictions = cs.stuck_evictions;
  out.waiting_evictions = cs.queue.held;
  out.held_evictions = cs.held_evictions;
  out.settling_evictions = cs.settling_evictions;
  out.storm_breaker_open = cs.breaker_open ? 1 : 0;
  // Decided by the controller; the sink's are the rare ones handed over before a switch.
  out.dry_run_pod_deletions = cs.dry_run_deletions + ss.dry_run_deletions;
  out.deadlines_from_taint_time = cs.deadlines_from_taint_time;
  for (std::size_t i = 0; i < controller::skip_reason_count; ++i) {
    out.pods_skipped[std::string(controller::to_string(static_cast<controller::skip_reason>(i)))] =
        cs.skipped[i];
  }
  out.toleration_overrides = cs.toleration_overrides;
  out.terminating_pods_skipped = cs.terminating_skipped;
  add_informer_stats(out, "pods", pods);
  add_informer_stats(out, "nodes", nodes);
  // Each occurrence recorded ends in one of them (see writers::event_recorder_stats).
  out.events = {{"sent", es.sent},
                {"updated", es.updated},
                {"aggregated", es.aggregated},
                {"failed", es.failed},
                {"dropped_spam", es.dropped_spam},
                {"dropped_full", es.dropped_full},
                {"dropped_stopped", es.dropped_stopped}};
  return out;
}

void add_informer_stats(metrics::scrape_stats& out, const std::string& resource,
                        const k8sclient::reflector_stats& stats) {
  out.watch_restarts[resource] = stats.watch_restarts;
  out.relists[resource] = stats.relists;
  out.list_watch_backoffs[resource] = stats.backoffs;
  out.watch_decode_errors[resource] = stats.decode_errors;
}

}  // namespace tec::cmd
