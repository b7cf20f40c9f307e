#pragma once

#include "event_outlet.hpp"
#include "holds.hpp"
#include "policy_state.hpp"
#include "tainted_nodes.hpp"
#include "tec/base/clock.hpp"
#include "tec/timedqueue/timed_queue.hpp"

#include <spdlog/logger.h>

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace tec::controller::detail {

/// A hold in force for a pod: when it ends, and whose annotation it is.
struct hold_in_force {
  wall_time until;
  bool node = false;  ///< The node's annotation (else the pod's).
};

/// How long an eviction waits past its due time (README "Holds", "Storm breaker"): the holds
/// in force (the pods' hold-until annotations are judged here, the nodes' at intake into the
/// hold_book it borrows) and the storm breaker's settling time, as the deferral of its queue
/// entry; and the events and log lines that tell of them. Called from the workers under the
/// pod's key lock (pod_decider), deferral_for() on the node's worker only (it reads when that
/// worker's tainted table first saw each taint). Borrows everything it is given.
class eviction_deferrals {
public:
  eviction_deferrals(const hold_book& node_holds, const tainted_nodes& tainted,
                     const policy_state& policy, const event_outlet& outlet, base::clock& clock,
                     std::shared_ptr<spdlog::logger> log)
      : node_holds_(node_holds),
        tainted_(tainted),
        policy_(policy),
        outlet_(outlet),
        clock_(clock),
        log_(std::move(log)) {}

  /// The hold of `pod` (known under `key`) in force now: its own or its node's, the later.
  /// The pod's annotation is judged: a value ignored the first time it is seen gets a Warning
  /// event and a log line.
  std::optional<hold_in_force> judge(std::string_view key, const pod_view& pod);
  /// The pod known under `key` is gone: its annotation is forgotten.
  void forget(std::string_view key) { pod_holds_.forget(key); }

  /// The deferral of an eviction of `pod` (on the node whose NoExecute taints are `taints`)
  /// due at `due`, decided at `now` (the driver's clock), with the policy's scoping rules
  /// `scope` (may be null); none (time_point{}) when nothing delays it.
  [[nodiscard]] timedqueue::deferral deferral_for(const pod_view& pod,
                                                  const std::vector<taint>& taints,
                                                  const std::optional<hold_in_force>& hold,
                                                  timedqueue::time_point due,
                                                  timedqueue::time_point now,
                                                  const eviction_policy* scope) const;

  /// `hold` just started to keep the eviction of `pod`, due at `due`, waiting until `d.until`:
  /// its Normal TaintEvictionHeld event and log line.
  void note_held(const pod_view& pod, const hold_in_force& hold, timedqueue::deferral d,
                 timedqueue::time_point due, timedqueue::time_point now);

private:
  const hold_book& node_holds_;
  const tainted_nodes& tainted_;
  const policy_state& policy_;
  const event_outlet& outlet_;
  base::clock& clock_;
  std::shared_ptr<spdlog::logger> log_;
  hold_book pod_holds_;
};

}  // namespace tec::controller::detail
