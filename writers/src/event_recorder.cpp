#include "tec/writers/event_recorder.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lru_map.hpp"
#include "tec/base/logger.hpp"
#include "tec/base/rfc3339.hpp"
#include "tec/base/sanitize.hpp"
#include "tec/base/token_bucket.hpp"
#include "tec/k8sclient/api_error.hpp"
#include "tec/k8sclient/hostname.hpp"
#include "tec/k8sclient/paths.hpp"
#include "tec/writers/pod_writer.hpp"

namespace tec::writers {
namespace {

namespace asio = boost::asio;
using controller::event_kind;
using controller::pod_ref;
using nlohmann::json;

constexpr std::size_t max_name_length = 253;

std::shared_ptr<spdlog::logger> logger() {
  static const std::shared_ptr<spdlog::logger> log = base::named_logger("events");
  return log;
}

/// Logs the exception (if any) that ended a coroutine of the recorder.
void log_unexpected(const std::exception_ptr& ep, std::string_view what) {
  if (!ep) {
    return;
  }
  try {
    std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    logger()->error("{} stopped by an unexpected exception: {}", what, e.what());
  }
}

/// The distinct messages seen of similar events (same object, type, reason), by hash: a
/// collision at worst sends one more message to the combined Event.
struct similar_events {
  std::vector<std::size_t> messages;
  std::chrono::steady_clock::time_point last;
};

/// client-go's EventSourceObjectSpamFilter and EventAggregator: whether an occurrence is
/// refused, and whether it goes to the combined Event of similar ones. Not synchronised (the
/// recorder's mutex guards it).
class event_filter {
public:
  /// `options` must outlive the filter (the recorder's own).
  explicit event_filter(const event_recorder_options& options)
      : options_(options),
        buckets_(options.spam_cache_size),
        similar_(options.correlation_cache_size) {}

  /// Takes a token from the object's bucket.
  bool spam_allow(const std::string& key, std::chrono::steady_clock::time_point now) {
    const double refill_per_second =
        options_.spam_refill_interval.count() > 0
            ? 1.0 / static_cast<double>(options_.spam_refill_interval.count())
            : 0.0;
    base::token_bucket* b = buckets_.find(key);
    if (b == nullptr) {
      b = &buckets_.put(key, base::token_bucket(refill_per_second, options_.spam_burst, now));
    }
    return b->try_take(now);
  }

  /// Notes `message` among the similar events under `key`; true when it goes to the combined
  /// Event: it is a new distinct message and aggregate_max_messages - 1 others were seen, each
  /// within the window of the previous similar event.
  bool aggregate(const std::string& key, const std::string& message,
                 std::chrono::steady_clock::time_point now) {
    similar_events* rec = similar_.find(key);
    if (rec == nullptr || now - rec->last > options_.correlation_window) {
      rec = &similar_.put(key, similar_events{{}, now});
    }
    rec->last = now;
    const std::size_t hash = std::hash<std::string>{}(message);
    if (std::find(rec->messages.begin(), rec->messages.end(), hash) != rec->messages.end()) {
      return false;
    }
    if (rec->messages.size() + 1 >= std::max<std::size_t>(options_.aggregate_max_messages, 1)) {
      return true;  // Not remembered: the set stays at the first max - 1 messages.
    }
    rec->messages.push_back(hash);
    return false;
  }

private:
  const event_recorder_options& options_;
  lru_map<base::token_bucket> buckets_;  // The spam filter, by object.
  lru_map<similar_events> similar_;      // The aggregation, by object, type and reason.
};

/// One Event on the server (or to be created there) and the occurrences not yet in it.
/// Guarded by the recorder's mutex, except the fields set before it is first queued and never
/// written again (key, object, name, combined, first, content.type and content.reason), which a
/// delivery reads freely. A delivery owns it (`busy`) while a request is out.
struct series {
  // The correlation key: object, type, reason, and the hash of the message or "combined".
  std::string key;
  involved_object object;
  event_content content;  // The message moves to the latest one on a combined Event.
  std::string name;
  bool combined = false;                        // A "(combined from similar events)" Event.
  std::chrono::system_clock::time_point first;  // firstTimestamp
  std::chrono::system_clock::time_point last;   // lastTimestamp: the latest occurrence
  std::chrono::steady_clock::time_point seen;   // The latest occurrence, for the window.
  std::uint64_t confirmed = 0;                  // Occurrences the Event on the server counts.
  std::uint64_t pending = 0;                    // Recorded, not yet carried by a request.
  bool exists = false;  // Created on the server: the next request is a PATCH.
  bool queued = false;
  bool busy = false;
};

/// Where the Event about `object` lives: its namespace, or "default" for a cluster-scoped
/// object such as a Node (as the kubelet's node events).
std::string_view event_namespace(const involved_object& object) {
  return object.ref.namespace_.empty() ? std::string_view("default")
                                       : std::string_view(object.ref.namespace_);
}

}  // namespace

event_content make_event_content(const pod_ref& pod, event_kind kind, std::string_view detail) {
  return event_content{std::string(controller::event_type_of(kind)),
                       std::string(controller::event_reason_of(kind)),
                       controller::event_message(pod, kind, detail)};
}

std::string make_event_body(const involved_object& object, const event_content& content,
                            const std::string& name, const event_recorder_options& options,
                            std::chrono::system_clock::time_point first,
                            std::chrono::system_clock::time_point last, std::uint64_t count) {
  json involved = {{"kind", object.kind},
                   {"apiVersion", object.api_version},
                   {"namespace", object.ref.namespace_},
                   {"name", object.ref.name}};
  if (!object.ref.uid.empty()) {
    involved["uid"] = object.ref.uid;
  }
  const json body = {
      {"kind", "Event"},
      {"apiVersion", "v1"},
      {"metadata", {{"name", name}, {"namespace", event_namespace(object)}}},
      {"involvedObject", std::move(involved)},
      {"type", content.type},
      {"reason", content.reason},
      {"message", content.message},
      {"source", {{"component", options.component}}},
      {"reportingComponent", options.component},
      {"reportingInstance", options.reporting_instance},
      {"firstTimestamp", base::format_rfc3339(first)},
      {"lastTimestamp", base::format_rfc3339(last)},
      {"count", count},
  };
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string make_event_patch(std::string_view message, std::chrono::system_clock::time_point last,
                             std::uint64_t count) {
  const json patch = {
      {"count", count},
      {"lastTimestamp", base::format_rfc3339(last)},
      {"message", message},
  };
  return patch.dump(-1, ' ', false, json::error_handler_t::replace);
}

struct event_recorder::impl {
  impl(asio::any_io_executor ex, k8sclient::client& c, event_recorder_options opts,
       std::shared_ptr<base::clock> clk)
      : executor(std::move(ex)),
        api(c),
        options(std::move(opts)),
        clock(std::move(clk)),
        filter(options),
        idle(options.correlation_cache_size),
        wake(executor, 1) {
    if (options.reporting_instance.empty()) {
      options.reporting_instance = k8sclient::local_hostname();
    }
  }

  /// client-go's "<object name>.<unix nanos in hex>", unique even when the wall clock stands
  /// still or steps back. Names must stay DNS subdomains of at most 253 characters, so a very
  /// long object name is shortened.
  std::string next_name(std::string_view object_name, std::chrono::system_clock::time_point at) {
    const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch());
    std::uint64_t value = nanos.count() > 0 ? static_cast<std::uint64_t>(nanos.count()) : 0;
    if (value <= last_name_nanos) {
      value = last_name_nanos + 1;
    }
    last_name_nanos = value;
    const std::string suffix = fmt::format(".{:x}", value);
    std::string name(object_name.substr(0, max_name_length - suffix.size()));
    while (!name.empty() && (name.back() == '.' || name.back() == '-')) {
      name.pop_back();
    }
    return name + suffix;
  }

  /// Whether one more series fits in the queue, after dropping the oldest one's occurrences
  /// if that is the policy. Called with mutex held.
  bool make_room() {
    if (queue.size() < std::max<std::size_t>(options.queue_capacity, 1)) {
      return true;
    }
    if (!options.drop_oldest) {
      return false;
    }
    drop(queue.front(), counters.dropped_full);
    queue.pop_front();
    return true;
  }

  /// Counts the pending occurrences of `s`, which leaves the queue (or its delivery), as
  /// dropped into `counter`; with no request queued or in flight any more, `s` goes from
  /// `active` to the LRU of `idle` series, unless a newer series took its key meanwhile.
  /// Called with mutex held.
  void drop(const std::shared_ptr<series>& s, std::uint64_t& counter) {
    counter += s->pending;
    s->pending = 0;
    s->queued = false;
    const auto it = active.find(s->key);
    if (it != active.end() && it->second == s) {
      active.erase(it);
      idle.put(s->key, s);
    }
  }

  /// The correlation of record(): see the top of event_recorder.hpp.
  bool record(const involved_object& object, event_content content) {
    const pod_ref& pod = object.ref;
    // One recorder is one source (component and instance): they are not part of the keys.
    // NUL separates the parts.
    const std::string nul(1, '\0');
    const std::string object_key =
        object.kind + nul + pod.namespace_ + nul + pod.name + nul + pod.uid;
    // The object, type and reason, then what tells the series.
    std::string key = object_key + nul + content.type + nul + content.reason;
    {
      const std::lock_guard lock(mutex);
      if (phase == lifecycle::stopped) {
        ++counters.dropped_stopped;
        return false;
      }
      const auto now = clock->now();
      if (!filter.spam_allow(object_key, now)) {
        ++counters.dropped_spam;
        return false;
      }
      const bool combined = filter.aggregate(key, content.message, now);
      if (combined) {
        content.message = base::sanitize_message(
            "(combined from similar events): " + content.message, options.max_message_bytes);
        key += '\1';
      } else {
        // The message's hash keeps the keys short (a message may take 1 KiB); the message
        // itself is compared below.
        key += nul + fmt::format("{:x}", std::hash<std::string>{}(content.message));
      }
      std::shared_ptr<series> s;
      if (const auto it = active.find(key); it != active.end()) {
        s = it->second;
      } else if (std::shared_ptr<series>* known = idle.find(key)) {
        s = *known;
      }
      if (s && (now - s->seen > options.correlation_window ||
                (!combined && s->content.message != content.message))) {
        s = nullptr;  // A new Event (an older one still queued or in flight goes on alone).
      }
      const bool joins = s && (s->queued || s->busy);
      if (!joins && !make_room()) {
        ++counters.dropped_full;
        return false;
      }
      const auto wall = clock->wall();
      if (!s) {
        s = std::make_shared<series>();
        s->key = key;
        s->object = object;
        s->name = next_name(pod.name, wall);
        s->combined = combined;
        s->first = wall;
        s->content = std::move(content);
      } else if (combined) {
        s->content.message = std::move(content.message);  // The latest similar message.
      }
      s->last = wall;
      s->seen = now;
      ++s->pending;
      ++counters.recorded;
      if (joins) {
        return true;  // Its queued or in-flight request takes this occurrence along.
      }
      idle.erase(key);
      active.erase(key);  // An older series of this key lives on, owned by its request.
      active.emplace(s->key, s);
      s->queued = true;
      queue.push_back(std::move(s));
    }
    // A full channel means a wake-up is already pending: nothing to do.
    wake.try_send(boost::system::error_code{});
    return true;
  }

  /// The next series to deliver, now owned by its delivery; none when stopped, when the
  /// queue is empty or when max_in_flight deliveries run already.
  std::shared_ptr<series> pop() {
    const std::lock_guard lock(mutex);
    if (phase == lifecycle::stopped || queue.empty() ||
        in_flight >= std::max<std::size_t>(options.max_in_flight, 1)) {
      return nullptr;
    }
    std::shared_ptr<series> s = std::move(queue.front());
    queue.pop_front();
    s->queued = false;
    s->busy = true;
    ++in_flight;
    return s;
  }

  /// A delivery ended: its slot is free, and the series goes back to the queue if
  /// occurrences came in meanwhile (after the others: one busy series does not hold a slot).
  void delivered(const std::shared_ptr<series>& s) {
    {
      const std::lock_guard lock(mutex);
      --in_flight;
      s->busy = false;
      const bool stopped = phase == lifecycle::stopped;
      if (s->pending > 0 && !stopped && make_room()) {
        s->queued = true;
        queue.push_back(s);
      } else {
        drop(s, stopped ? counters.dropped_stopped : counters.dropped_full);
      }
    }
    wake.try_send(boost::system::error_code{});
  }

  bool is_stopped() const {
    const std::lock_guard lock(mutex);
    return phase == lifecycle::stopped;
  }

  /// The next request for `s`, carrying its pending occurrences (added to `taken`): a POST
  /// creating the Event while it does not exist, else a PATCH of its count.
  k8sclient::request next_request(series& s, std::uint64_t& taken) {
    const std::lock_guard lock(mutex);
    taken += s.pending;
    s.pending = 0;
    const std::uint64_t count = s.confirmed + taken;
    const std::string events = "/api/v1/namespaces/" +
                               k8sclient::escape_path_segment(event_namespace(s.object)) +
                               "/events";
    k8sclient::request req =
        s.exists ? k8sclient::request(boost::beast::http::verb::patch,
                                      events + "/" + k8sclient::escape_path_segment(s.name),
                                      make_event_patch(s.content.message, s.last, count),
                                      "application/strategic-merge-patch+json")
                 : k8sclient::request(boost::beast::http::verb::post, events,
                                      make_event_body(s.object, s.content, s.name, options, s.first,
                                                      s.last, count));
    req.background = true;  // evictions first, their record right after
    return req;
  }

  /// The `taken` occurrences are in the Event on the server now.
  void settle(series& s, bool created, std::uint64_t taken) {
    const std::lock_guard lock(mutex);
    s.confirmed += taken;
    s.exists = true;
    if (s.combined) {
      counters.aggregated += taken;
    } else if (created) {
      counters.sent += taken;
    } else {
      counters.updated += taken;
    }
  }

  void give_up(std::uint64_t taken) {
    const std::lock_guard lock(mutex);
    counters.failed += taken;
  }

  /// One request of a series (with its attempts), carrying every occurrence pending when it
  /// is (re)sent. `retry_timer` is this delivery's own (in retry_timers, so that stop() can
  /// cancel its wait).
  asio::awaitable<void> deliver(std::shared_ptr<series> s, asio::steady_timer& retry_timer) {
    const std::string pod = s->object.ref.namespace_ + "/" + s->object.ref.name;
    std::uint64_t taken = 0;
    bool switched = false;  // Went from PATCH to POST (404) or from POST to PATCH (409) once.
    for (int attempt = 1;;) {
      k8sclient::request req = next_request(*s, taken);
      const bool create = req.method == boost::beast::http::verb::post;
      auto resp = co_await api.send(std::move(req));
      if (resp && resp->status >= 200 && resp->status < 300) {
        settle(*s, create, taken);
        co_return;
      }
      if (resp && !switched && resp->status == (create ? 409U : 404U)) {
        // 404 on a PATCH: the Event expired (the API server's --event-ttl, 1 h by default)
        // or was deleted: create it again under its name. 409 on a POST: our name is taken,
        // by our own earlier POST whose answer was lost: update it.
        switched = true;
        logger()->debug("event {} pod=\"{}\": {}, {} it", s->name, pod, resp->status,
                        create ? "updating" : "re-creating");
        const std::lock_guard lock(mutex);
        s->exists = create;
        continue;
      }
      if (resp) {
        // A status is an answer: 403 (RBAC, terminating namespace), 422... Resending the
        // same request will not change it; the client already retried 429/5xx.
        const base::error err = k8sclient::api_error(
            std::string(create ? "POST" : "PATCH") + " event for pod " + pod, resp.value());
        logger()->warn("dropping event pod=\"{}\" reason={}: {}", pod, s->content.reason,
                       err.message);
        give_up(taken);
        co_return;
      }
      if (attempt >= options.max_attempts || is_stopped()) {
        logger()->warn("dropping event pod=\"{}\" reason={} after {} attempt(s): {}", pod,
                       s->content.reason, attempt, resp.error().message);
        give_up(taken);
        co_return;
      }
      ++attempt;
      retry_timer.expires_after(options.retry_delay);
      co_await retry_timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }

  static asio::awaitable<void> deliver_one(std::shared_ptr<impl> self, std::shared_ptr<series> s,
                                           asio::steady_timer& retry_timer) {
    co_await self->deliver(std::move(s), retry_timer);
  }

  /// Starts deliveries in queue order while slots are free, then waits for a record() or a
  /// finished delivery. Each delivery owns a reference to the state, so none outlives it.
  static asio::awaitable<void> drain(std::shared_ptr<impl> self) {
    for (;;) {
      while (auto next = self->pop()) {
        const auto timer = self->retry_timers.emplace(self->retry_timers.end(), self->executor);
        asio::co_spawn(self->executor, deliver_one(self, next, *timer),
                       [self, timer, next](const std::exception_ptr& ep) {
                         self->retry_timers.erase(timer);
                         self->delivered(next);
                         log_unexpected(ep, "an event's delivery");
                       });
      }
      if (self->is_stopped()) {
        co_return;
      }
      auto [ec] = co_await self->wake.async_receive(asio::as_tuple(asio::use_awaitable));
      if (ec) {
        co_return;  // Closed by stop().
      }
    }
  }

  asio::any_io_executor executor;
  k8sclient::client& api;
  event_recorder_options options;
  std::shared_ptr<base::clock> clock;

  mutable std::mutex mutex;  // Guards everything below it.
  std::deque<std::shared_ptr<series>> queue;
  event_filter filter;
  // The series, by key: those with a request queued or in flight are never forgotten (so one
  // key never gets two Events while its first is still being written); at most
  // queue_capacity + max_in_flight of them (each key views its series' key). The others in an
  // LRU.
  std::unordered_map<std::string_view, std::shared_ptr<series>> active;
  lru_map<std::shared_ptr<series>> idle;
  event_recorder_stats counters;
  std::uint64_t last_name_nanos = 0;
  std::size_t in_flight = 0;  // Deliveries started and not yet ended.
  enum class lifecycle : std::uint8_t { created, started, stopped } phase = lifecycle::created;

  // Thread-safe by itself: record() and finished deliveries signal from any thread.
  asio::experimental::concurrent_channel<void(boost::system::error_code)> wake;
  // One retry timer per delivery in flight, removed when it ends; only touched on the
  // executor.
  std::list<asio::steady_timer> retry_timers;
};

event_recorder::event_recorder(asio::any_io_executor executor, k8sclient::client& c,
                               event_recorder_options options, std::shared_ptr<base::clock> clock)
    : impl_(std::make_shared<impl>(std::move(executor), c, std::move(options), std::move(clock))) {}

event_recorder::~event_recorder() {
  stop();
}

void event_recorder::start() {
  {
    const std::lock_guard lock(impl_->mutex);
    if (impl_->phase != impl::lifecycle::created) {
      return;
    }
    impl_->phase = impl::lifecycle::started;
  }
  asio::co_spawn(impl_->executor, impl::drain(impl_),
                 [](const std::exception_ptr& ep) { log_unexpected(ep, "event delivery"); });
}

void event_recorder::stop() {
  {
    const std::lock_guard lock(impl_->mutex);
    if (impl_->phase == impl::lifecycle::stopped) {
      return;
    }
    impl_->phase = impl::lifecycle::stopped;
    for (const auto& s : impl_->queue) {
      impl_->drop(s, impl_->counters.dropped_stopped);
    }
    impl_->queue.clear();
  }
  impl_->wake.close();
  asio::post(impl_->executor, [self = impl_] {
    for (auto& timer : self->retry_timers) {
      timer.cancel();
    }
  });
}

bool event_recorder::record(const involved_object& object, event_content content) {
  content.message = base::sanitize_message(content.message, impl_->options.max_message_bytes);
  return impl_->record(object, std::move(content));
}

bool event_recorder::record(const pod_ref& pod, event_kind kind, std::string_view detail) {
  return record(involved_object{.ref = pod}, make_event_content(pod, kind, detail));
}

event_recorder_stats event_recorder::stats() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->counters;
}

std::size_t event_recorder::queued() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->queue.size();
}

metrics::table event_recorder::metric_table() const {
  return {metrics::counter_row_by(
      "result", "events_total",
      "Pod events (TaintManagerEviction, TaintEvictionFailed), by what became of them.", [this] {
        // Each occurrence recorded ends in one of them (see event_recorder_stats).
        const event_recorder_stats s = stats();
        return std::vector<metrics::sample>{
            {"sent", static_cast<double>(s.sent)},
            {"updated", static_cast<double>(s.updated)},
            {"aggregated", static_cast<double>(s.aggregated)},
            {"failed", static_cast<double>(s.failed)},
            {"dropped_spam", static_cast<double>(s.dropped_spam)},
            {"dropped_full", static_cast<double>(s.dropped_full)},
            {"dropped_stopped", static_cast<double>(s.dropped_stopped)}};
      })};
}

}  // namespace tec::writers
