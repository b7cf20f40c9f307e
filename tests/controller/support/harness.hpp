#pragma once

// A controller in manual mode on a manual clock, with a fake pod cache and a recording sink,
// plus helpers that play the informers: every helper updates the cache first, then tells the
// controller, then runs everything that became runnable (workers and posted work).

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "controller/support/fakes.hpp"
#include "support/manual_driver.hpp"
#include "tec/controller/controller.hpp"

namespace tec::controller::testing {

/// Longer than any toleration or retry the tests set up: what happens "eventually".
inline constexpr auto ten_days = std::chrono::hours(24 * 10);

inline controller_options manual_options(std::size_t workers = 8) {
  controller_options o;
  o.workers = workers;
  o.threaded = false;
  o.retry.initial = std::chrono::seconds(1);
  o.retry.max = std::chrono::seconds(8);
  o.retry.jitter = 0.0;
  o.retry.seed = 1;
  return o;
}

/// manual_options() with `policy`.
inline controller_options with_policy(const eviction_policy& policy) {
  controller_options o = manual_options();
  o.policy = policy;
  return o;
}

class harness {
public:
  /// `clock`: the driver's (default: a manual clock of its own).
  explicit harness(controller_options options = manual_options(),
                   std::shared_ptr<test::manual_clock> clock = nullptr)
      : drv(clock ? std::move(clock)
                  : std::make_shared<test::manual_clock>(timedqueue::manual_driver::default_start)),
        sink(&index),
        ctl(index, sink, drv, std::move(options)) {}
  ~harness() {
    sink.drop_held();
    ctl.shutdown();
  }

  /// Runs controller workers and posted queue work until neither has anything left.
  void settle() {
    for (int i = 0; i < 1000; ++i) {
      const std::size_t n = ctl.run_until_idle_for_test() + drv.run_pending();
      if (n == 0) {
        return;
      }
    }
  }

  /// Moves the clock (firing due evictions at their own deadlines) and settles.
  void advance(timedqueue::duration d) {
    settle();
    drv.advance(d);
    settle();
  }

  void add_node(const node_view& n) {
    nodes_[n.name] = n;
    ctl.node_updated(nullptr, &n);
    settle();
  }
  void update_node(const node_view& n) {
    const auto it = nodes_.find(n.name);
    if (it == nodes_.end()) {
      add_node(n);
      return;
    }
    const node_view old = it->second;
    it->second = n;
    ctl.node_updated(&old, &n);
    settle();
  }
  void delete_node(const std::string& name) {
    const auto it = nodes_.find(name);
    if (it == nodes_.end()) {
      return;
    }
    const node_view old = it->second;
    nodes_.erase(it);
    ctl.node_updated(&old, nullptr);
    settle();
  }
  [[nodiscard]] const std::map<std::string, node_view>& nodes() const { return nodes_; }

  void add_pod(const pod_view& p) {
    index.put(p);
    ctl.pod_updated(nullptr, &p);
    settle();
  }
  /// Replaces the pod under its name; the informer reports an update old -> new.
  void update_pod(const pod_view& p) {
    const auto old = index.get_pod(p.namespace_, p.name);
    index.put(p);
    if (old) {
      ctl.pod_updated(&*old, &p);
    } else {
      ctl.pod_updated(nullptr, &p);
    }
    settle();
  }
  void delete_pod(const std::string& name, const std::string& ns = "default") {
    const auto old = index.erase(ns, name);
    if (old) {
      ctl.pod_updated(&*old, nullptr);
    }
    settle();
  }

  [[nodiscard]] bool scheduled(const std::string& name, const std::string& ns = "default") const {
    return ctl.queue_for_test().lookup(ns + "/" + name).has_value();
  }
  [[nodiscard]] bool evicted(const std::string& name) const { return sink.evictions_of(name) > 0; }

  timedqueue::manual_driver drv;
  fake_index index;
  recording_sink sink;
  controller ctl;

private:
  std::map<std::string, node_view> nodes_;
};

/// The wall clock of a wall_harness when it is made, seconds since the Unix epoch.
inline constexpr std::int64_t wall_start_unix = 1'700'000'000;

/// A harness whose controller reads the manual driver's clock (controller_options::clock),
/// its wall() at wall_start_unix when it is made.
struct wall_harness {
  explicit wall_harness(controller_options o = manual_options())
      : h(with_clock(std::move(o), clock), clock) {}

  static controller_options with_clock(controller_options o,
                                       std::shared_ptr<test::manual_clock> c) {
    o.clock = std::move(c);
    return o;
  }

  [[nodiscard]] std::chrono::system_clock::time_point wall_now() const { return clock->wall(); }

  /// The process starts acting: the caches hold `n` and `pods`, replayed as adds.
  void replay(const node_view& n, const std::vector<pod_view>& pods) {
    for (const pod_view& p : pods) {
      h.index.put(p);
    }
    h.ctl.node_updated(nullptr, &n, update_origin::replay);
    for (const pod_view& p : pods) {
      h.ctl.pod_updated(nullptr, &p);
    }
    h.settle();
  }

  std::shared_ptr<test::manual_clock> clock = std::make_shared<test::manual_clock>(
      timedqueue::manual_driver::default_start,
      std::chrono::system_clock::time_point(std::chrono::seconds(wall_start_unix)));
  harness h;
};

}  // namespace tec::controller::testing
