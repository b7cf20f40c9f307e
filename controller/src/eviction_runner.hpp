#pragma once

#include "common.hpp"
#include "event_outlet.hpp"
#include "eviction_tables.hpp"
#include "outcome_ledger.hpp"
#include "policy_state.hpp"
#include "tainted_nodes.hpp"
#include "tec/controller/controller.hpp"

#include <spdlog/logger.h>

namespace tec::controller::detail {

/// What eviction_runner is configured with (from controller_options).
struct runner_options {
  std::uint32_t stuck_after = 5;  ///< >= 1.
  timedqueue::duration stuck_event_interval{};
  std::function<void(std::chrono::nanoseconds)> on_deleted;
  std::function<void(std::chrono::nanoseconds)> on_waited;
  base::clock& clock;      ///< Read for wall(): the due times in messages.
  outcome_ledger& ledger;  ///< Told how each attempt and each entry ends (the history).
};

/// The timed queue's work: one attempt of an eviction per run() (the pod re-checked in the
/// cache, dry-run, Evict mode and its fallback to a DELETE, the sink called), its answer
/// turned into the queue's outcome, and the tables of stuck and blocked evictions those
/// answers leave. run() is called on the driver's thread; the sink's callbacks may come from
/// any thread; forget_cancelled() and the readers from any thread (the tables lock).
/// Borrows everything it is given; the queue whose work it is must be shut down first.
class eviction_runner {
public:
  eviction_runner(const pod_index& pods, eviction_sink& sink, timedqueue::driver& drv,
                  const event_outlet& outlet, const policy_state& policy,
                  const tainted_nodes& tainted, counters& ctr, std::shared_ptr<spdlog::logger> log,
                  runner_options options);

  /// The queue's work function: starts one attempt of the eviction `info` is for. A throwing
  /// pod_index or sink fails the attempt (retried with backoff).
  void run(const timedqueue::run_info& info, timedqueue::completion done);

  /// The queue entry of `key` was cancelled: its eviction leaves the stuck, blocked and
  /// marked tables. True when its cancel is to be announced as a pending one's is: it was
  /// blocked, or announced ("Marking for deletion") and no attempt is running. A running one
  /// is announced when its attempt ends without a deletion. `pod_stays` false (the pod is
  /// gone or terminating): an announced eviction is forgotten without an announcement.
  bool forget_cancelled(std::string_view key, bool pod_stays = true);

  /// The blocked record of `key`, whatever its generation (for evictions()).
  [[nodiscard]] std::optional<blocked_record> blocked(std::string_view key) const {
    return blocked_.lookup(key);
  }
  [[nodiscard]] std::size_t stuck_count() const { return stuck_.size(); }
  [[nodiscard]] std::size_t blocked_count() const { return blocked_.size(); }

private:
  struct pending_done;

  void start(const timedqueue::run_info& info, std::optional<timedqueue::completion>& slot);
  // The parts of start(), in order (see each in eviction_runner.cpp).
  struct way {
    eviction_method method = eviction_method::delete_pod;
    std::chrono::milliseconds fallback{0};
    bool blocked = false;  // a disruption budget refused this eviction before
  };
  void note_attempt_started(const timedqueue::run_info& info, const entry_id& id);
  bool ended_before_sending(const timedqueue::run_info& info, const entry_id& id,
                            const std::optional<pod_view>& pod, const pod_ref& ref);
  way way_for(const timedqueue::run_info& info, const pod_view& pod, const pod_ref& ref);
  void announce_attempt(const timedqueue::run_info& info, const pod_ref& ref,
                        eviction_method method, bool quiet);
  // An attempt that ends before calling the sink, with success: the eviction is over.
  static void settle(std::optional<timedqueue::completion>& slot);
  // The eviction of `key` (`generation`) is over, or answered: it leaves both tables.
  void forget(std::string_view key, std::uint64_t generation);
  [[nodiscard]] std::chrono::milliseconds fallback_for(const pod_view& pod) const;
  [[nodiscard]] std::vector<taint> causes_for(const pod_view& pod) const;
  /// A `stale` answer is retried no later than this.
  static constexpr std::chrono::seconds stale_retry{1};
  void fall_back(const pod_ref& pod, timedqueue::duration blocked_for,
                 std::chrono::milliseconds fallback);
  void attempt_blocked(pending_done& holder, std::string_view key, std::uint64_t generation,
                       const pod_ref& pod, std::string message, std::chrono::milliseconds fallback);
  void finish_attempt(pending_done& holder, std::string_view key, std::uint64_t generation,
                      std::uint32_t attempt, timedqueue::time_point fire_at, const pod_ref& pod,
                      eviction_result result, eviction_method method,
                      std::chrono::milliseconds fallback);
  void attempt_failed(std::string_view key, std::uint64_t generation, std::uint32_t attempt,
                      const pod_ref& pod, std::string_view error,
                      const std::function<bool()>& cancelled);
  // An attempt of `key` ended without a deletion: announces the cancel that came meanwhile.
  void ended_undone(std::string_view key, std::uint64_t generation, const pod_ref& pod);

  const pod_index& pods_;
  eviction_sink& sink_;
  timedqueue::driver& drv_;
  const event_outlet& outlet_;
  const policy_state& policy_;
  const tainted_nodes& tainted_;
  counters& ctr_;
  std::shared_ptr<spdlog::logger> log_;
  const runner_options options_;
  stuck_table stuck_;
  blocked_table blocked_;
  marked_table marked_;
};

}  // namespace tec::controller::detail
