#include "shadow_parts.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tec::cmd {

void shadow_parts::build(metrics::registry& registry, std::chrono::milliseconds window,
                         const controller::controller& ctrl) {
  metrics.emplace(metrics::register_shadow_metrics(registry));
  shadow::shadow_options so;
  so.window = window;
  so.node_taints = [&ctrl](std::string_view node) {
    std::vector<std::string> out;
    for (const auto& t : ctrl.tainted_taints(node).value_or(std::vector<controller::taint>{})) {
      out.push_back(shadow::describe_taint(t));
    }
    return out;
  };
  so.on_settled = [m = *metrics](const shadow::shadow_settled& s) {
    m.decisions.with({shadow::to_string(s.outcome)}).inc();
    if (s.outcome == shadow::shadow_outcome::agreed) {
      m.agreement_delay.observe(s.delay_seconds);
    }
    if (s.early) {
      m.settled_early.inc();
    }
  };
  tracker.emplace(std::move(so));
}

informers::pod_informer::handler shadow_parts::compare_pods(
    const informers::controller_feed& feed, informers::pod_informer::handler forward) {
  return [this, &feed, forward = std::move(forward)](const informers::pod_record* old_pod,
                                                     const informers::pod_record* new_pod) {
    forward(old_pod, new_pod);
    if (feed.active()) {
      tracker->pod_changed(old_pod, new_pod);
    }
  };
}

void shadow_parts::sweep() {
  tracker->sweep();
  metrics->pending.set(static_cast<double>(tracker->counts().pending));
}

}  // namespace tec::cmd
