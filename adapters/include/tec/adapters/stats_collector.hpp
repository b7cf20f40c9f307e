#pragma once

// The libraries count (controller, eviction sink, informers, event recorder); the Prometheus
// counters are copied from those counts at each scrape.

#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <string>

#include "tec/adapters/event_recorder.hpp"
#include "tec/adapters/eviction_sink.hpp"
#include "tec/adapters/informers.hpp"
#include "tec/controller/controller.hpp"
#include "tec/ops/metrics.hpp"

namespace tec::adapters {

/// Copies the libraries' statistics into the standard metrics.
///
/// Thread/ownership: borrows every source and the metrics' registry (all must outlive it).
/// collect() may be called from any thread (it runs on the HTTP server's executor per scrape).
class stats_collector {
public:
  struct sources {
    const controller::controller& ctrl;
    const k8s_eviction_sink& sink;
    const pod_informer& pods;
    const node_informer& nodes;
    const event_recorder& recorder;
  };

  stats_collector(ops::standard_metrics metrics, sources from) : metrics_(metrics), from_(from) {}

  /// Brings the metrics up to date: counters grow by what the sources counted since the last
  /// call, gauges take the current values.
  void collect();

private:
  static constexpr std::size_t event_result_count = 7;

  ops::standard_metrics metrics_;
  sources from_;
  std::mutex mutex_;
  // Last values copied into the Prometheus counters (the libraries count; we export deltas).
  struct {
    std::uint64_t deletions = 0;
    std::uint64_t scheduled = 0;
    std::uint64_t cancelled = 0;
    std::uint64_t retries = 0;
    std::map<std::string, std::uint64_t> failures;
    std::uint64_t watch_restarts[2] = {0, 0};
    std::uint64_t relists[2] = {0, 0};
    std::uint64_t decode_errors[2] = {0, 0};
    std::map<std::string, std::uint64_t> condition_failures;
    std::uint64_t events[event_result_count] = {};
  } last_;
};

}  // namespace tec::adapters
