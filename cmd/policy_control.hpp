#pragma once

// The eviction policy in force and the storm breaker's reports (the daemon's part that applies
// --policy's file as it changes, and says so).

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "options.hpp"
#include "tec/controller/controller.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/metrics/metrics.hpp"
#include "tec/policy/reloader.hpp"
#include "tec/writers/event_recorder.hpp"
#include "tec/writers/named_object_events.hpp"

namespace spdlog {
class logger;
}

namespace tec::cmd {

// The eviction policy in force and the storm breaker's reports: the policy file re-read off
// the I/O thread and applied, the breaker's log line every minute while it is open and its
// Events on the Lease. Borrows the options, `stopping`, the API client and the recorder (from
// construction) and the controller (from attach()), which all outlive it.
class policy_control {
public:
  policy_control(const options& opts, std::shared_ptr<spdlog::logger> log,
                 const std::atomic<bool>& stopping, k8sclient::client& api,
                 writers::event_recorder& recorder, const metrics::standard_metrics& metrics);

  // Main thread, before the I/O thread runs.
  void attach(controller::controller& ctrl) { ctrl_ = &ctrl; }
  // Main thread, before the I/O thread runs: --policy's file is re-read from now on.
  void watch_file() { reloader_.emplace(opts_.policy_file, opts_.policy); }
  // Main thread, in shutdown: a poll being made finishes; its result is dropped (stopping).
  void join_reader() { reader_.join(); }

  // I/O thread (every policy_poll_interval): one poll of the policy file, made on reader_;
  // false once shutdown began (the result of a poll made meanwhile is dropped).
  boost::asio::awaitable<bool> poll();

  // Any thread (the controller calls it when the breaker opens or closes; must not call back
  // into the controller). The storm breaker's Events go on the controller's Lease (kind Lease
  // in --leader-elect-resource-namespace, named --leader-elect-resource-name): it names this
  // controller whether or not leader election is on, and `kubectl describe lease` shows them.
  // Warning StormBreakerOpen when it opens and with each minute's log line while it stays
  // open, Normal StormBreakerClosed when it closes; none in dry-run (nothing is written).
  void breaker_event(bool open, std::size_t tainted, std::size_t known,
                     std::optional<std::size_t> held);

private:
  // I/O thread. A valid new policy applies at once (its dry-run too: the sink and these Events
  // read the controller's, one switch); an invalid one leaves the old one in force. Both are
  // recorded on --policy-configmap's ConfigMap and in the policy_* gauges.
  boost::asio::awaitable<void> apply(const policy::reload_result& r);

  // I/O thread: an Event on --policy-configmap's ConfigMap (none without one, none in dry-run:
  // it writes nothing; writers::named_object_events reads the ConfigMap's UID).
  boost::asio::awaitable<void> record_policy_event(const char* type, const char* reason,
                                                   std::string message);

  static double unix_seconds();

  // I/O thread: while the storm breaker holds every eviction, say so every minute.
  void log_open_breaker();

  const options& opts_;
  std::shared_ptr<spdlog::logger> log_;
  const std::atomic<bool>& stopping_;
  writers::event_recorder& recorder_;
  metrics::standard_metrics metrics_;
  controller::controller* ctrl_ = nullptr;
  std::optional<policy::reloader> reloader_;  // I/O thread and reader_, one poll at a time
  // Reads and parses the policy file (reloader_) off the I/O thread: a hung mount or a large
  // file must not stall probes, the lease or evictions (issue 29). One poll at a time: the
  // next starts only once a result is back on the I/O thread. After reloader_, so a poll
  // still running is joined before the reloader goes.
  boost::asio::thread_pool reader_{1};
  std::chrono::steady_clock::time_point breaker_logged_at_{};  // I/O thread
  // When the breaker last opened (std::chrono::steady_clock::duration ticks; set by the
  // controller's thread).
  std::atomic<std::chrono::steady_clock::rep> breaker_opened_at_{0};
  std::string sha_;         // I/O thread: the policy file in force's SHA-256
  bool announced_ = false;  // I/O thread: the start's PolicyApplied recorded
  // --policy-configmap's Events (none without it); I/O thread.
  std::optional<writers::named_object_events> configmap_events_;
};

}  // namespace tec::cmd
