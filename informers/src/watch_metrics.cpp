#include <memory>
#include <utility>

#include "tec/informers/informers.hpp"

namespace tec::informers {

metrics::table watch_metric_table(std::vector<watched_resource> watched) {
  auto shared = std::make_shared<const std::vector<watched_resource>>(std::move(watched));
  const auto by_resource = [shared](std::uint64_t k8sclient::reflector_stats::*field) {
    return [shared, field] {
      std::vector<metrics::sample> out;
      for (const auto& w : *shared) {
        out.push_back({w.resource, static_cast<double>(w.stats().*field)});
      }
      return out;
    };
  };
  return {
      metrics::counter_row_by("resource", "watch_restarts_total", "Watches restarted, by resource.",
                              by_resource(&k8sclient::reflector_stats::watch_restarts)),
      metrics::counter_row_by("resource", "relists_total", "Full re-LISTs, by resource.",
                              by_resource(&k8sclient::reflector_stats::relists)),
      metrics::counter_row_by("resource", "list_watch_backoffs_total",
                              "LIST and WATCH restarts that waited for the backoff (410 Gone, "
                              "failures), by resource.",
                              by_resource(&k8sclient::reflector_stats::backoffs)),
      metrics::counter_row_by("resource", "watch_decode_errors_total",
                              "Objects in watch events or LIST pages that could not be decoded "
                              "and were skipped, by resource.",
                              by_resource(&k8sclient::reflector_stats::decode_errors)),
  };
}

}  // namespace tec::informers
