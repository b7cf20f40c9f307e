#include "tec/adapters/stats_collector.hpp"

#include <string_view>
#include <utility>

namespace tec::adapters {
namespace {

// The event recorder's counters behind taint_eviction_controller_events_total{result}.
using event_result = std::pair<std::string_view, std::uint64_t event_recorder_stats::*>;
// Each occurrence recorded ends in one of them (see event_recorder_stats).
constexpr event_result event_results[] = {
    {"sent", &event_recorder_stats::sent},
    {"updated", &event_recorder_stats::updated},
    {"aggregated", &event_recorder_stats::aggregated},
    {"failed", &event_recorder_stats::failed},
    {"dropped_spam", &event_recorder_stats::dropped_spam},
    {"dropped_full", &event_recorder_stats::dropped_full},
    {"dropped_stopped", &event_recorder_stats::dropped_stopped},
};

void add_delta(ops::counter& c, std::uint64_t now, std::uint64_t& seen) {
  if (now > seen) {
    c.inc(static_cast<double>(now - seen));
  }
  seen = now;
}

}  // namespace

void stats_collector::collect() {
  static_assert(std::size(event_results) == event_result_count);
  const std::lock_guard lock(mutex_);
  auto& m = metrics_;
  auto& last = last_;
  const auto cs = from_.ctrl.stats();
  const auto ss = from_.sink.stats();
  add_delta(m.pod_deletions, ss.deletions, last.deletions);
  add_delta(m.scheduled_evictions, cs.evictions_scheduled, last.scheduled);
  add_delta(m.cancelled_evictions, cs.cancellations, last.cancelled);
  const auto retries =
      cs.eviction_attempts > cs.evictions_started ? cs.eviction_attempts - cs.evictions_started : 0;
  add_delta(m.pod_deletion_retries, retries, last.retries);
  for (const auto& [reason, count] : ss.failures_by_reason) {
    add_delta(m.pod_deletion_failures.with({reason}), count, last.failures[reason]);
  }
  for (const auto& [reason, count] : ss.condition_failures_by_reason) {
    add_delta(m.disruption_condition_failures.with({reason}), count,
              last.condition_failures[reason]);
  }
  m.tainted_nodes.set(static_cast<double>(cs.tainted_nodes));
  m.stuck_evictions.set(static_cast<double>(cs.stuck_evictions));
  const auto ps = from_.pods.stats();
  const auto ns = from_.nodes.stats();
  add_delta(m.watch_restarts.with({"pods"}), ps.watch_restarts, last.watch_restarts[0]);
  add_delta(m.watch_restarts.with({"nodes"}), ns.watch_restarts, last.watch_restarts[1]);
  add_delta(m.relists.with({"pods"}), ps.relists, last.relists[0]);
  add_delta(m.relists.with({"nodes"}), ns.relists, last.relists[1]);
  add_delta(m.watch_decode_errors.with({"pods"}), ps.decode_errors, last.decode_errors[0]);
  add_delta(m.watch_decode_errors.with({"nodes"}), ns.decode_errors, last.decode_errors[1]);
  const auto es = from_.recorder.stats();
  for (std::size_t i = 0; i < std::size(event_results); ++i) {
    const auto& [result, field] = event_results[i];
    add_delta(m.events.with({result}), es.*field, last.events[i]);
  }
}

}  // namespace tec::adapters
