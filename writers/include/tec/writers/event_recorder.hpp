#pragma once

// core/v1 Events, delivered in the background so that event delivery never blocks or slows
// an eviction (docs/behaviour.md §7), and correlated as client-go's EventCorrelator
// (tools/record/events_cache.go) does, so that `kubectl describe pod` shows "x3 over 2m"
// instead of three Events. record() of one occurrence, in order:
// 1. the per-object spam filter (EventSourceObjectSpamFilter: a token bucket per object); a
//    refused occurrence leaves no trace (client-go counts it into the Event it refuses);
// 2. aggregation of similar events (same object, type and reason, another message): from the
//    aggregate_max_messages-th distinct message within the window on, a new message goes to
//    one Event "(combined from similar events): <the latest message>";
// 3. correlation with the same event (same object incl. uid, type, reason and message) within
//    the window: its Event's count and lastTimestamp are raised by a strategic merge PATCH
//    instead of a new POST. (client-go counts until the Event expires on the server, 1 h by
//    default; the window keeps "x3 over 2m" about one episode.) A PATCH answered 404 (the
//    Event expired) creates it again under its name with the full count.
//
// One Event (a "series": one correlation key) has one request at a time: an occurrence of a
// series queued or in flight only raises its pending count, which the next request carries.
// So one key never gets two POSTs, a PATCH follows only a successful POST, and increments
// coalesce. Series wait on a bounded FIFO queue drained by one coroutine, up to
// max_in_flight requests at once, sent as background requests (they wait while a DELETE
// waits for a connection or an answer, so deletions go first). The spam filter, aggregation
// records and idle series live in LRUs (client-go's 4096); a series queued or in flight is
// never forgotten. Unlike upstream, involvedObject carries the pod's uid.

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "tec/base/clock.hpp"
#include "tec/controller/ports.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/metrics/table.hpp"

namespace tec::writers {

struct event_recorder_options {
  /// source.component and reportingComponent. Upstream (1.29+) uses the controller name
  /// "taint-eviction-controller"; before 1.29 the events came from "taint-controller".
  std::string component = "taint-eviction-controller";
  /// reportingInstance; empty means this host's name.
  std::string reporting_instance;
  /// Series waiting for delivery beyond this are dropped (see drop_oldest); an occurrence of a
  /// series already queued or in flight takes no room. Room for a mass eviction of thousands
  /// of pods (upstream's broadcaster keeps 1000), at 1-2 KB per queued series.
  std::size_t queue_capacity = 20000;
  /// When full: true drops the oldest queued series' pending occurrences (the newest tells
  /// the current state), false drops the new occurrence.
  bool drop_oldest = true;
  /// The spam filter: `spam_burst` events per object, then one per `spam_refill_interval`.
  double spam_burst = 25;
  std::chrono::seconds spam_refill_interval{300};
  /// Objects the spam filter remembers (LRU, client-go's 4096).
  std::size_t spam_cache_size = 4096;
  /// How long after an occurrence the same event still counts into the same Event, and a
  /// similar one into the same aggregation (client-go's aggregation interval, 600 s).
  std::chrono::seconds correlation_window{600};
  /// Distinct messages of similar events (same object, type, reason) within the window from
  /// which on a new message goes to the combined Event (client-go's 10).
  std::size_t aggregate_max_messages = 10;
  /// Series and aggregation records remembered, each (LRU, client-go's 4096).
  std::size_t correlation_cache_size = 4096;
  /// Messages are clipped to this many bytes (base::sanitize_message): a Warning's message
  /// carries an API error text of any length.
  std::size_t max_message_bytes = 1024;
  /// Event requests (POST or PATCH) in flight at once (0 counts as 1), started in queue order;
  /// they may complete out of order (each series has its own name).
  std::size_t max_in_flight = 32;
  /// Delivery attempts per request for transport failures (the client retries 429/5xx).
  int max_attempts = 3;
  /// Wait between two attempts of one request (each delivery waits on its own).
  std::chrono::milliseconds retry_delay{1000};
};

/// Counters for metrics; a consistent snapshot. Every occurrence passed to record() ends in
/// exactly one of sent, updated, aggregated, failed and the three dropped_* (or is still
/// pending): nothing is lost without a count.
struct event_recorder_stats {
  /// Accepted by record() (queued, or added to a series already queued or in flight).
  std::uint64_t recorded = 0;
  /// Delivered by creating an Event (POST 2xx, also the re-creation after a PATCH got 404).
  std::uint64_t sent = 0;
  /// Delivered by raising an existing Event's count (PATCH 2xx; one PATCH may carry several).
  std::uint64_t updated = 0;
  /// Delivered into a "(combined from similar events)" Event (created or raised).
  std::uint64_t aggregated = 0;
  /// Given up after the attempts (transport error, or a non-2xx status).
  std::uint64_t failed = 0;
  /// Refused by the per-object spam filter.
  std::uint64_t dropped_spam = 0;
  /// Dropped because the queue was full.
  std::uint64_t dropped_full = 0;
  /// Recorded after stop(), or still pending at stop().
  std::uint64_t dropped_stopped = 0;
};

/// What an Event says: core/v1 type ("Normal", "Warning"), reason and message.
struct event_content {
  std::string type;
  std::string reason;
  std::string message;
};

/// The object an Event is about (its involvedObject): a pod, or another object such as the
/// controller's Lease (the storm breaker's events). `ref` gives namespace, name and uid (an
/// empty uid is left out of the Event).
struct involved_object {
  std::string api_version = "v1";
  std::string kind = "Pod";
  controller::pod_ref ref;

  friend bool operator==(const involved_object&, const involved_object&) = default;
};

/// The content of the controller's event `kind` for `pod` (ports.hpp: event_type_of,
/// event_reason_of, event_message).
event_content make_event_content(const controller::pod_ref& pod, controller::event_kind kind,
                                 std::string_view detail = {});

/// The JSON body of the Event to POST (pure; exposed for tests). `name` is the series'
/// metadata.name, `first`/`last` its firstTimestamp/lastTimestamp, `count` the occurrences
/// it stands for.
std::string make_event_body(const involved_object& object, const event_content& content,
                            const std::string& name, const event_recorder_options& options,
                            std::chrono::system_clock::time_point first,
                            std::chrono::system_clock::time_point last, std::uint64_t count);

/// The strategic merge patch (application/strategic-merge-patch+json) that sets an existing
/// Event's count, lastTimestamp and message (the message changes only for a combined Event),
/// the fields client-go's PATCH carries.
std::string make_event_patch(std::string_view message, std::chrono::system_clock::time_point last,
                             std::uint64_t count);

/// Records events in the background (see the top of this file).
///
/// Thread/ownership: record(), stats() and queued() may be called from any thread and never
/// block on I/O. The drainer and its deliveries run on `executor` (the client's, which must not
/// run handlers concurrently). `client` must outlive the deliveries: call stop() and let the
/// executor run until idle before destroying the client. The state is shared with the drainer
/// and the deliveries, so destroying the recorder while they run is safe (it stops them). The
/// executor's execution context must outlive the recorder (stop() posts to it).
class event_recorder {
public:
  /// `clock`: now() for the spam filter and the correlation windows, wall() for the
  /// timestamps and the generated event names.
  event_recorder(boost::asio::any_io_executor executor, k8sclient::client& c,
                 event_recorder_options options = {},
                 std::shared_ptr<base::clock> clock = base::real_clock());
  ~event_recorder();
  event_recorder(const event_recorder&) = delete;
  event_recorder& operator=(const event_recorder&) = delete;

  /// Spawns the draining coroutine on the executor. Call once.
  void start();
  /// Stops the drainer and cancels the retry waits of the deliveries in flight, which finish or
  /// fail as their current request does. Pending occurrences and further record() calls are
  /// dropped and counted (at shutdown we do not wait for the API server).
  void stop();

  /// Records one occurrence of an Event about `object` (a pod, a Lease, ...; keyed by its kind
  /// too), its message sanitised (base::sanitize_message). False when the spam filter refuses
  /// it, the recorder is stopped or the queue is full (and !drop_oldest); an accepted one may
  /// still be dropped later to make room when drop_oldest.
  bool record(const involved_object& object, event_content content);
  /// record() about `pod` with make_event_content(pod, kind, detail).
  bool record(const controller::pod_ref& pod, controller::event_kind kind,
              std::string_view detail = {});

  [[nodiscard]] event_recorder_stats stats() const;
  /// events_total{result}, read from stats() at each scrape, for registry::publish(). The row
  /// reads this recorder: it must outlive its use. Any thread.
  [[nodiscard]] metrics::table metric_table() const;
  /// Series waiting in the queue.
  [[nodiscard]] std::size_t queued() const;

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace tec::writers
