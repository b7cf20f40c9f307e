#include "metric_set.hpp"

#include <utility>

namespace tec::cmd {

void publish_metric_set(metrics::registry& r, metric_sources sources) {
  r.publish(sources.ctrl.metric_table());
  r.publish(sources.sink.metric_table());
  r.publish(sources.recorder.metric_table());
  r.publish(informers::watch_metric_table(std::move(sources.watched)));
}

}  // namespace tec::cmd
