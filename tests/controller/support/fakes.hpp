#pragma once

// Test doubles for the controller's seams: an in-memory pod cache, a sink that records (and
// optionally holds) eviction calls, a driver with real threads for the threaded tests, and
// builders for the upstream test fixtures (taint i, toleration i with seconds d).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "tec/controller/controller.hpp"
#include "tec/controller/model.hpp"
#include "tec/controller/ports.hpp"
#include "tec/timedqueue/timed_queue.hpp"

namespace tec::controller::testing {

/// What `c` counts now, by the name it publishes (controller::metric_table(), without the
/// daemon's prefix; `label_value` for a labelled family), e.g.
/// counted(ctl, "scheduled_evictions_total"). A name the controller does not publish fails
/// the test.
inline std::uint64_t counted(const controller& c, std::string_view metric,
                             std::string_view label_value = {}) {
  const auto v = metrics::read(c.metric_table(), metric, label_value);
  if (!v) {
    ADD_FAILURE() << "the controller publishes no " << metric << " {" << label_value << "}";
    return 0;
  }
  return static_cast<std::uint64_t>(*v);
}

/// Pod cache keyed by namespace/name. Thread-safe.
class fake_index final : public pod_index {
public:
  /// Adds or replaces the pod under its namespace/name.
  void put(const pod_view& pod);
  /// Removes it; returns what was there.
  std::optional<pod_view> erase(std::string_view ns, std::string_view name);
  [[nodiscard]] std::vector<pod_view> all() const;

  [[nodiscard]] std::vector<pod_view> pods_on_node(std::string_view node) const override;
  [[nodiscard]] std::optional<pod_view> get_pod(std::string_view ns,
                                                std::string_view name) const override;

  /// Called (outside the lock) at the start of pods_on_node, e.g. to block a worker.
  std::function<void(std::string_view node)> on_pods_on_node;

private:
  mutable std::mutex mu_;
  std::map<std::string, pod_view, std::less<>> pods_;
};

/// Records every evict() and record_event(). Modes: complete each eviction at once with
/// `auto_result`, or hold the `done` callbacks for the test to release.
class recording_sink final : public eviction_sink {
public:
  struct call {
    pod_ref pod;
    bool pod_current = false;         ///< The index held this very UID when evict() was called.
    std::function<bool()> cancelled;  ///< The request's cancellation check.
    bool stuck = false;               ///< The request's `stuck` flag.
    eviction_method method = eviction_method::delete_pod;  ///< The request's method.
    std::string node;                                      ///< The request's node.
    std::vector<taint> causes;                             ///< The request's causes.
  };

  explicit recording_sink(fake_index* api = nullptr) : api_(api) {}

  void evict(eviction_request request, std::function<void(eviction_result)> done) override;
  void record_event(const pod_ref& pod, event_kind kind, std::string_view detail) override;
  void eviction_cancelled(const pod_ref& pod) override {
    std::lock_guard lock(mu_);
    withdrawn_.push_back(pod);
  }
  /// The pods eviction_cancelled() was called for, in order.
  [[nodiscard]] std::vector<pod_ref> withdrawn() const {
    std::lock_guard lock(mu_);
    return withdrawn_;
  }
  /// Recorded as an event about pod_ref{"", node, ""}.
  void record_node_event(std::string_view node, event_kind kind, std::string_view detail) override {
    record_event(pod_ref{"", std::string(node), ""}, kind, detail);
  }

  /// true: hold `done`; false: call it at once with the next scripted result (default ok).
  void set_hold(bool hold);
  /// Results for the next auto-completed evictions, in order (then `deleted`). With
  /// `applies_to`, only evictions of the pods it accepts take them (the others are `deleted`).
  /// A scripted `blocked` given to a request whose method is not evict is `deleted`.
  void script(std::vector<eviction_status> results,
              std::function<bool(const pod_ref&)> applies_to = {});
  /// The error a `failed` or `blocked` result carries from now on (default "injected failure").
  void set_failure_message(std::string message);

  /// Completes the oldest held eviction; returns its pod, or nullopt if none is held.
  std::optional<pod_ref> release_oldest(eviction_status status);
  /// Completes the held eviction at `index` (0 = oldest).
  std::optional<pod_ref> release(std::size_t index, eviction_status status);
  /// Drops every held callback without calling it.
  void drop_held();
  [[nodiscard]] std::size_t held() const;

  [[nodiscard]] std::vector<call> calls() const;
  [[nodiscard]] std::vector<std::pair<pod_ref, event_kind>> events() const;
  /// The detail of every recorded event, in the order of events().
  [[nodiscard]] std::vector<std::string> event_details() const;
  /// Evict calls for the pod named `name` (any namespace, any UID).
  [[nodiscard]] std::size_t evictions_of(std::string_view name) const;
  [[nodiscard]] bool evicted_uid(std::string_view uid) const;
  [[nodiscard]] std::size_t events_of(std::string_view name, event_kind kind) const;
  /// Bounded wait until `pred()` holds (checked on every evict call). For threaded tests.
  bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

  /// With an api index: a successful eviction removes the pod from it when the UID matches
  /// (the DELETE precondition), and is reported here.
  std::function<void(const pod_view& deleted)> on_deleted;

private:
  void finish(const pod_ref& pod, std::function<void(eviction_result)>& done,
              eviction_status status);

  fake_index* api_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;
  std::deque<eviction_status> script_;
  std::function<bool(const pod_ref&)> script_applies_to_;
  std::string failure_message_ = "injected failure";
  std::vector<call> calls_;
  std::vector<std::pair<pod_ref, event_kind>> events_;
  std::vector<std::string> event_details_;
  std::vector<pod_ref> withdrawn_;
  std::deque<std::pair<pod_ref, std::function<void(eviction_result)>>> held_;
};

/// The production driver (asio_driver on the real clock) with one thread for posted work and
/// the timer; work still posted when it is destroyed is dropped.
class thread_driver final : public timedqueue::driver {
public:
  thread_driver();
  ~thread_driver() override;
  thread_driver(const thread_driver&) = delete;
  thread_driver& operator=(const thread_driver&) = delete;

  [[nodiscard]] timedqueue::time_point now() const override;
  void arm(timedqueue::time_point deadline, std::function<void()> on_due) override;
  void disarm() override;
  void post(std::function<void()> fn) override;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Upstream's fixtures: taint i = key testTaint<i>, value test<i>, NoExecute.
taint make_taint(int i);
/// Toleration i: key testTaint<i>, value test<i>, Equal, NoExecute, `seconds` (unset when < 0).
toleration make_toleration(int i, std::int64_t seconds);
/// A pod in namespace "default" with a fresh unique UID.
pod_view make_pod(std::string name, std::string node, std::vector<toleration> tolerations = {});
node_view make_node(std::string name, std::vector<taint> taints = {});
std::string fresh_uid();

/// Threaded mode with `workers` workers and fast, seeded retries (1 ms doubling to 5 ms).
controller_options threaded_options(std::size_t workers);

}  // namespace tec::controller::testing
