#pragma once

// core/v1 Events for pods (reason TaintManagerEviction), delivered in the background so that
// event delivery never blocks or slows an eviction (api-client.md "Writes",
// upstream-behavior.md section 7).
//
// record() applies client-go's per-object spam filter (EventSourceObjectSpamFilter: a token
// bucket per source+object, burst 25, then one token every 300 s) and puts the event on a
// bounded queue. One coroutine drains the queue in FIFO order and keeps up to
// `max_in_flight` POST /api/v1/namespaces/{ns}/events at once. The POSTs are background
// requests: they take only the pooled connections no DELETE is waiting for, so a mass
// eviction's deletions go first and its events follow at the API server's pace. Unlike upstream,
// involvedObject carries the pod's uid, so `kubectl describe pod` shows them.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tec/controller/ports.hpp"
#include "tec/k8s/client.hpp"

namespace tec::k8s {

struct event_recorder_options {
  /// source.component and reportingComponent. Upstream (1.29+) uses the controller name
  /// "taint-eviction-controller"; before 1.29 the events came from "taint-controller".
  std::string component = "taint-eviction-controller";
  /// reportingInstance; empty means this host's name.
  std::string reporting_instance;
  /// Events waiting for delivery beyond this are dropped (see drop_oldest). Room for the
  /// events of a mass eviction of thousands of pods (upstream's broadcaster keeps 1000 and
  /// drops the rest); a queued event takes about 200 bytes, so the worst case is about 4 MB.
  std::size_t queue_capacity = 20000;
  /// When full: true drops the oldest queued event (the newest tells the current state),
  /// false drops the new one.
  bool drop_oldest = true;
  /// The spam filter: `spam_burst` events per object, then one per `spam_refill_interval`.
  double spam_burst = 25;
  std::chrono::seconds spam_refill_interval{300};
  /// Objects the spam filter remembers (least recently used forgotten first, as client-go's
  /// LRU of 4096).
  std::size_t spam_cache_size = 4096;
  /// Event POSTs in flight at once (0 counts as 1). They start in queue order; events of one
  /// pod may complete out of order (their names are unique, nothing depends on the order).
  std::size_t max_in_flight = 32;
  /// Delivery attempts per event for transport failures (the client already retries 429/5xx).
  int max_attempts = 3;
  /// Wait between two attempts of one event (each delivery waits on its own).
  std::chrono::milliseconds retry_delay{1000};
};

/// The clocks the recorder reads: steady for the spam filter, wall for the timestamps and
/// the generated event names. Tests inject manual ones.
struct event_clock {
  std::function<std::chrono::steady_clock::time_point()> steady = [] {
    return std::chrono::steady_clock::now();
  };
  std::function<std::chrono::system_clock::time_point()> wall = [] {
    return std::chrono::system_clock::now();
  };
};

/// Counters for metrics; a consistent snapshot.
struct event_recorder_stats {
  std::uint64_t recorded = 0;         ///< Accepted by record() onto the queue.
  std::uint64_t sent = 0;             ///< Created on the server (2xx).
  std::uint64_t failed = 0;           ///< Given up after the attempts (error or non-2xx status).
  std::uint64_t dropped_spam = 0;     ///< Refused by the per-object spam filter.
  std::uint64_t dropped_full = 0;     ///< Dropped because the queue was full.
  std::uint64_t dropped_stopped = 0;  ///< Recorded after stop(), or still queued at stop().
};

/// The JSON body of the Event to POST (pure; exposed for tests). `name` is the generated
/// metadata.name, `now` gives firstTimestamp/lastTimestamp.
std::string make_event_body(const controller::pod_ref& pod, controller::event_kind kind,
                            std::string_view detail, const std::string& name,
                            const event_recorder_options& options,
                            std::chrono::system_clock::time_point now);

/// This host's name (gethostname), "unknown" when it cannot be read.
std::string local_hostname();

/// Records pod events in the background.
///
/// Thread/ownership: record() and stats() may be called from any thread and never block on
/// I/O. The draining coroutine and its deliveries run on `executor` (the client's executor,
/// which must not run handlers concurrently); start() spawns the drainer, stop() ends it
/// (queued events are dropped and counted: at shutdown we do not wait for the API server) and
/// cancels the retry waits of the deliveries in flight, which then finish or fail as their
/// current request does. `client` must outlive the deliveries: call stop() and let the
/// executor run until idle before destroying the client. The recorder's state is shared with
/// the drainer and the deliveries, so destroying the recorder object while they run is safe
/// (it stops them). The executor's execution context must outlive the recorder (stop() posts
/// to it).
class event_recorder {
public:
  event_recorder(boost::asio::any_io_executor executor, client& c,
                 event_recorder_options options = {}, event_clock clock = {});
  ~event_recorder();
  event_recorder(const event_recorder&) = delete;
  event_recorder& operator=(const event_recorder&) = delete;

  /// Spawns the draining coroutine on the executor. Call once.
  void start();
  /// Stops the drainer; the requests in flight (if any) end as above, without retries.
  /// Further record() calls drop.
  void stop();

  /// Queues the event unless the spam filter refuses it or the recorder is stopped. Returns
  /// whether it was queued (it may still be dropped later to make room when drop_oldest).
  bool record(const controller::pod_ref& pod, controller::event_kind kind,
              std::string_view detail = {});

  [[nodiscard]] event_recorder_stats stats() const;
  /// Events waiting in the queue.
  [[nodiscard]] std::size_t queued() const;

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace tec::k8s
