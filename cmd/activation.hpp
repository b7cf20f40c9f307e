#pragma once

// When the daemon starts acting: once the pod, node and namespace caches hold a full LIST and
// it may lead (it holds the lease, or leader election is off). The namespaces are waited for
// too: until they are listed, nothing says which namespaces opt out of eviction. Each condition
// arrives as an event (the reflectors' on_synced, the elector's on_started_leading) and the last
// one to arrive activates at once, in the same call: nothing polls, so activation does not wait for
// a timer, and the replay that activation performs runs on the I/O thread before any further
// informer event.

#include <functional>

namespace tec::cmd {

/// Single-threaded: every member runs on the daemon's I/O thread.
class activation_gate {
public:
  /// `on_caches_synced` runs once, when the last cache syncs; `activate` runs once, when
  /// the last of the four conditions holds, unless close() was called before.
  activation_gate(std::function<void()> on_caches_synced, std::function<void()> activate);

  void pods_synced();
  void nodes_synced();
  void namespaces_synced();
  /// We hold the lease (or leader election is off).
  void may_lead();
  /// Leadership was lost or shutdown began: never activate from now on.
  void close();

  [[nodiscard]] bool caches_synced() const noexcept { return pods_ && nodes_ && namespaces_; }
  [[nodiscard]] bool activated() const noexcept { return activated_; }

private:
  void check();

  std::function<void()> on_caches_synced_;
  std::function<void()> activate_;
  bool pods_ = false;
  bool nodes_ = false;
  bool namespaces_ = false;
  bool may_lead_ = false;
  bool reported_sync_ = false;
  bool closed_ = false;
  bool activated_ = false;
};

}  // namespace tec::cmd
