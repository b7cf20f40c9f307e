#pragma once

#include "common.hpp"
#include "tainted_nodes.hpp"
#include "tec/controller/policy.hpp"
#include "tec/controller/ports.hpp"
#include "tec/timedqueue/timed_queue.hpp"

#include <spdlog/logger.h>

#include <mutex>
#include <unordered_set>

namespace tec::controller::detail {

/// The storm breaker (storm_breaker_policy): pauses the timed queue while too large a share of
/// the nodes carry a NoExecute taint it counts, and resumes it when the share falls. Its view
/// of the cluster is every node it was told of and the tainted ones among them. Any thread: its
/// mutex guards that view, the settings and the state, and the queue is paused or resumed under
/// it, so the queue follows the breaker's decisions in order. Borrows the queue.
class storm_breaker {
public:
  /// `on_change` (controller_options::on_breaker) is called, outside the lock, when it opens
  /// or closes.
  storm_breaker(timedqueue::timed_queue& queue,
                std::function<void(bool open, std::size_t tainted, std::size_t nodes)> on_change,
                std::shared_ptr<spdlog::logger> log);

  /// A new policy's settings, re-evaluated at once as if closed (raising the threshold above
  /// the current share releases an open breaker). When its taint keys changed, the tainted
  /// nodes are counted again from `tainted`.
  void configure(const storm_breaker_policy& cfg, const tainted_nodes& tainted);

  /// A node update, seen at intake (before the workers decide its pods, so a storm pauses
  /// evictions as soon as it is seen): old_node null: added; new_node null: deleted.
  void node_updated(const node_view* old_node, const node_view* new_node);

  struct state {
    bool open = false;
    std::size_t tainted_nodes = 0;  ///< The nodes carrying a NoExecute taint it counts.
    std::size_t nodes = 0;          ///< The nodes it knows.
  };
  [[nodiscard]] state current() const;

private:
  [[nodiscard]] bool counts(const std::vector<taint>& taints) const;
  bool evaluate(bool fresh = false);
  void changed();

  timedqueue::timed_queue& queue_;
  std::function<void(bool, std::size_t, std::size_t)> on_change_;
  std::shared_ptr<spdlog::logger> log_;
  mutable std::mutex mu_;  // guards the members below
  storm_breaker_policy cfg_;
  std::unordered_set<std::string, string_hash, std::equal_to<>> nodes_;
  std::unordered_set<std::string, string_hash, std::equal_to<>> tainted_;
  bool open_ = false;
};

}  // namespace tec::controller::detail
