#pragma once

#include "policy_state.hpp"
#include "tec/controller/controller.hpp"
#include "tec/controller/ports.hpp"
#include "tec/timedqueue/timed_queue.hpp"

#include <utility>

namespace tec::controller::detail {

/// Where the controller's decisions become visible: Events on the pods (through the sink;
/// none in dry-run, which writes nothing) and the notes of the decision observer
/// (controller_options::on_decision). Called from the workers and the driver, possibly under
/// a key lock; holds no lock of its own. Borrows the sink, the driver and the policy.
class event_outlet {
public:
  event_outlet(eviction_sink& sink, timedqueue::driver& drv, const policy_state& policy,
               std::function<void(const decision_note&)> on_decision)
      : sink_(sink), drv_(drv), policy_(policy), on_decision_(std::move(on_decision)) {}

  void record(const pod_ref& pod, event_kind kind, std::string_view detail = {}) const {
    if (!policy_.dry_run()) {
      sink_.record_event(pod, kind, detail);
    }
  }

  /// An event about the node `node` (see eviction_sink::record_node_event).
  void record_node(std::string_view node, event_kind kind, std::string_view detail) const {
    if (!policy_.dry_run()) {
      sink_.record_node_event(node, kind, detail);
    }
  }

  /// Whether there is an observer (no note is built without one).
  [[nodiscard]] bool observed() const { return static_cast<bool>(on_decision_); }

  /// Tells the observer, if any, of `note`.
  void note(const decision_note& note) const {
    if (on_decision_) {
      on_decision_(note);
    }
  }

  /// Tells the observer, if any, that the eviction of `pod`, due at `due`, was cancelled.
  void note_cancelled(pod_ref pod, cancel_reason reason, timedqueue::time_point due) const {
    if (!on_decision_) {
      return;
    }
    decision_note n;
    n.kind = decision_kind::cancelled;
    n.pod = std::move(pod);
    n.at = drv_.now();
    n.due = due;
    n.reason = reason;
    on_decision_(n);
  }

private:
  eviction_sink& sink_;
  timedqueue::driver& drv_;
  const policy_state& policy_;
  std::function<void(const decision_note&)> on_decision_;
};

}  // namespace tec::controller::detail
