#pragma once

// What the informers tell the controller: every pod and node change, once the process may act
// (it leads, and both caches hold a full LIST); nothing before, so a follower keeps warm caches
// without deciding anything.

#include <atomic>
#include <cstddef>

#include "tec/controller/controller.hpp"
#include "tec/informers/informers.hpp"
#include "tec/informers/store.hpp"

namespace tec::informers {

/// Forwards informer changes to a controller while active.
///
/// Thread/ownership: borrows the controller, which must outlive it and every handler it made.
/// The handlers and activate() run on the informers' executor (the I/O thread); deactivate()
/// and active() may be called from any thread.
class controller_feed {
public:
  explicit controller_feed(controller::controller& ctrl) : ctrl_(ctrl) {}
  controller_feed(const controller_feed&) = delete;
  controller_feed& operator=(const controller_feed&) = delete;

  /// The pod informer's handler: (old, new) records to the controller's pod_updated().
  [[nodiscard]] pod_informer::handler pod_handler();
  /// The node informer's handler: (old, new) records to the controller's node_updated().
  [[nodiscard]] node_informer::handler node_handler();

  /// What activate() replayed.
  struct replayed {
    std::size_t nodes = 0;
    std::size_t tainted_nodes = 0;  ///< Nodes with at least one NoExecute taint.
    std::size_t pods = 0;           ///< Pods on those nodes.
  };

  /// Starts forwarding, and replays every cached node, then every cached pod on a node with a
  /// NoExecute taint, as an add (a pod on another node has nothing to decide). Call it on the
  /// informers' executor, so that no informer event slips between the snapshot and the
  /// handlers starting to forward.
  replayed activate(const node_store& nodes, const pod_store& pods);

  /// Stops forwarding (at once: another process may already be leading). Any thread.
  void deactivate() noexcept { active_ = false; }

  [[nodiscard]] bool active() const noexcept { return active_.load(); }

private:
  controller::controller& ctrl_;
  std::atomic<bool> active_{false};
};

}  // namespace tec::informers
