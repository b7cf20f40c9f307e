#pragma once

#include "common.hpp"
#include "deferrals.hpp"
#include "event_outlet.hpp"
#include "policy_state.hpp"
#include "queue_entries.hpp"
#include "tainted_nodes.hpp"
#include "tec/controller/controller.hpp"
#include "worker_pool.hpp"

#include <spdlog/logger.h>

#include <mutex>

namespace tec::controller::detail {

/// What pod_decider is configured with (from controller_options).
struct decider_options {
  bool deadlines_from_taint_time = true;
  bool scheduled_events = true;
  base::clock& clock;                                         ///< Read for wall().
  std::function<bool(std::string_view)> namespace_opted_out;  ///< May be empty.
  /// The nodes' hold-until annotations (the intake records them); borrowed.
  const hold_book& node_holds;
};

/// The decisions (docs/behaviour.md §4 to §6): for a node update, every pod on the node; for a
/// pod update, that pod; each against the queue entry under its name (UID preconditions,
/// terminating pods, the replay's resumed countdowns), through queue_entries. Keeps the
/// tainted table: a node's worker records its taints here before deciding its pods. Called on
/// the workers' threads (update_handler); decisions for one pod key are made under a striped
/// key lock (key_locks_), so two workers never interleave lookup and cancel for one pod.
/// Holds and settling (README "Holds", "Storm breaker"): each eviction gets the deferral
/// eviction_deferrals works out when it is scheduled, and again at each decision while it
/// waits.
/// Borrows everything it is given.
class pod_decider final : public update_handler {
public:
  pod_decider(const pod_index& pods, timedqueue::driver& drv, tainted_nodes& tainted,
              queue_entries& entries, const event_outlet& outlet, const policy_state& policy,
              counters& ctr, std::shared_ptr<spdlog::logger> log, decider_options options);

  void node_changed(const std::string& name, std::optional<std::vector<taint>> taints,
                    bool replay) override;
  void pod_changed(std::string_view node, std::string_view key) override;

private:
  enum class verdict : std::uint8_t { done, reread };
  static constexpr std::size_t key_lock_count = 64;

  std::mutex& key_lock(std::string_view key) {
    return key_locks_[std::hash<std::string_view>{}(key) % key_lock_count];
  }
  void reconcile_locked(std::string_view key, std::string_view ns, std::string_view name,
                        std::string_view node, const std::vector<taint>* taints, bool from_node,
                        timedqueue::time_point now, bool replay = false);
  verdict decide_locked(std::string_view key, const pod_view& pod, const std::vector<taint>* taints,
                        bool from_node, timedqueue::time_point now, bool verified,
                        bool replay = false);
  verdict leave_terminating(std::string_view key, const pod_view& pod, bool verified);
  verdict leave_alone(std::string_view key, const pod_view& pod, bool cancel, bool verified);
  void note_resumed(std::string_view key, const pod_view& pod, const std::optional<countdown>& c,
                    timedqueue::time_point now, timedqueue::time_point fire_at);
  void note_skip(std::string_view key, skip_reason reason);
  void note_override(std::string_view key, const pod_view& pod, const taint* t, const taint_rule* r,
                     timedqueue::time_point now, timedqueue::time_point fire_at);
  void announce(const pod_view& pod, const std::vector<taint>& taints, const toleration_time& time,
                timedqueue::time_point now, timedqueue::time_point fire_at,
                const taint* set_by = nullptr);

  const pod_index& pods_;
  timedqueue::driver& drv_;
  tainted_nodes& tainted_;
  queue_entries& entries_;
  const event_outlet& outlet_;
  const policy_state& policy_;
  counters& ctr_;
  std::shared_ptr<spdlog::logger> log_;
  const bool deadlines_from_taint_time_;
  const bool scheduled_events_;
  base::clock& clock_;
  const std::function<bool(std::string_view)> namespace_opted_out_;
  eviction_deferrals deferrals_;
  std::array<std::mutex, key_lock_count> key_locks_;
};

}  // namespace tec::controller::detail
