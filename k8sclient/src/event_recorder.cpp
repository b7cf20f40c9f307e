#include "tec/k8s/event_recorder.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>
#include <exception>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "tec/k8s/pod_writer.hpp"

namespace tec::k8s {
namespace {

namespace asio = boost::asio;
using controller::event_kind;
using controller::pod_ref;
using nlohmann::json;

constexpr std::size_t max_name_length = 253;

std::shared_ptr<spdlog::logger> logger() {
  static const std::shared_ptr<spdlog::logger> log = [] {
    auto existing = spdlog::get("events");
    return existing ? existing : spdlog::default_logger()->clone("events");
  }();
  return log;
}

std::string hex(std::uint64_t value) {
  std::array<char, 20> buf{};
  const int n =
      std::snprintf(buf.data(), buf.size(), "%llx", static_cast<unsigned long long>(value));
  return {buf.data(), static_cast<std::size_t>(n)};
}

/// client-go names events "<object name>.<unix nanos in hex>"; names must stay DNS subdomains
/// of at most 253 characters, so a very long pod name is shortened.
std::string event_name(std::string_view pod_name, std::uint64_t nanos) {
  const std::string suffix = "." + hex(nanos);
  std::string base(pod_name.substr(0, max_name_length - suffix.size()));
  while (!base.empty() && (base.back() == '.' || base.back() == '-')) {
    base.pop_back();
  }
  return base + suffix;
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

struct pending_event {
  pod_ref pod;
  event_kind kind;
  std::string detail;
  std::string name;
  std::chrono::system_clock::time_point at;
};

/// client-go's passive token bucket: starts full, refills continuously.
struct bucket {
  double tokens = 0;
  std::chrono::steady_clock::time_point last;
  std::list<std::string>::iterator lru_pos;
};

}  // namespace

std::string local_hostname() {
  std::array<char, 256> buf{};
  if (::gethostname(buf.data(), buf.size() - 1) != 0 || buf[0] == '\0') {
    return "unknown";
  }
  return buf.data();
}

std::string make_event_body(const pod_ref& pod, event_kind kind, std::string_view detail,
                            const std::string& name, const event_recorder_options& options,
                            std::chrono::system_clock::time_point now) {
  const std::string stamp = format_rfc3339(now);
  const json body = {
      {"kind", "Event"},
      {"apiVersion", "v1"},
      {"metadata", {{"name", name}, {"namespace", pod.namespace_}}},
      {"involvedObject",
       {{"kind", "Pod"},
        {"apiVersion", "v1"},
        {"namespace", pod.namespace_},
        {"name", pod.name},
        {"uid", pod.uid}}},
      {"type", controller::event_type_of(kind)},
      {"reason", controller::event_reason_of(kind)},
      {"message", controller::event_message(pod, kind, detail)},
      {"source", {{"component", options.component}}},
      {"reportingComponent", options.component},
      {"reportingInstance", options.reporting_instance},
      {"firstTimestamp", stamp},
      {"lastTimestamp", stamp},
      {"count", 1},
  };
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

struct event_recorder::impl {
  impl(asio::any_io_executor ex, client& c, event_recorder_options opts, event_clock clk)
      : executor(std::move(ex)),
        api(c),
        options(std::move(opts)),
        clock(std::move(clk)),
        wake(executor, 1) {
    if (options.reporting_instance.empty()) {
      options.reporting_instance = local_hostname();
    }
  }

  /// Takes a token from the object's bucket. Called with mutex held.
  bool spam_allow(const std::string& key) {
    const auto now = clock.steady();
    const double refill_per_second =
        options.spam_refill_interval.count() > 0
            ? 1.0 / static_cast<double>(options.spam_refill_interval.count())
            : 0.0;
    auto it = buckets.find(key);
    if (it == buckets.end()) {
      lru.push_front(key);
      it = buckets.emplace(key, bucket{options.spam_burst, now, lru.begin()}).first;
      while (buckets.size() > std::max<std::size_t>(options.spam_cache_size, 1)) {
        buckets.erase(lru.back());
        lru.pop_back();
      }
    } else {
      lru.splice(lru.begin(), lru, it->second.lru_pos);
      const std::chrono::duration<double> elapsed = now - it->second.last;
      if (elapsed.count() > 0) {
        it->second.tokens =
            std::min(options.spam_burst, it->second.tokens + elapsed.count() * refill_per_second);
        it->second.last = now;
      }
    }
    if (it->second.tokens < 1.0) {
      return false;
    }
    it->second.tokens -= 1.0;
    return true;
  }

  /// A unique name even when the wall clock stands still or steps back.
  std::string next_name(const std::string& pod_name, std::chrono::system_clock::time_point at) {
    const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch());
    std::uint64_t value = nanos.count() > 0 ? static_cast<std::uint64_t>(nanos.count()) : 0;
    if (value <= last_name_nanos) {
      value = last_name_nanos + 1;
    }
    last_name_nanos = value;
    return event_name(pod_name, value);
  }

  /// The next event to deliver, counted as in flight; none when stopped, when the queue is
  /// empty or when max_in_flight deliveries run already.
  std::optional<pending_event> pop() {
    const std::lock_guard lock(mutex);
    if (stopped || queue.empty() || in_flight >= std::max<std::size_t>(options.max_in_flight, 1)) {
      return std::nullopt;
    }
    pending_event ev = std::move(queue.front());
    queue.pop_front();
    ++in_flight;
    return ev;
  }

  /// A delivery ended: its slot is free, the drainer may start the next one.
  void delivered() {
    {
      const std::lock_guard lock(mutex);
      --in_flight;
    }
    wake.try_send(boost::system::error_code{});
  }

  bool is_stopped() const {
    const std::lock_guard lock(mutex);
    return stopped;
  }

  void count(std::uint64_t event_recorder_stats::*field) {
    const std::lock_guard lock(mutex);
    ++(counters.*field);
  }

  /// One event's attempts. `retry_timer` is this delivery's own (in retry_timers, so that
  /// stop() can cancel its wait).
  asio::awaitable<void> deliver(pending_event ev, asio::steady_timer& retry_timer) {
    const std::string body = make_event_body(ev.pod, ev.kind, ev.detail, ev.name, options, ev.at);
    const std::string pod = ev.pod.namespace_ + "/" + ev.pod.name;
    for (int attempt = 1;; ++attempt) {
      request req;
      req.method = boost::beast::http::verb::post;
      req.target = "/api/v1/namespaces/" + escape_path_segment(ev.pod.namespace_) + "/events";
      req.body = body;
      req.background = true;  // evictions first, their record right after
      auto resp = co_await api.send(std::move(req));
      if (resp && resp->status >= 200 && resp->status < 300) {
        count(&event_recorder_stats::sent);
        co_return;
      }
      if (resp) {
        // A status is an answer: 403 (RBAC, terminating namespace), 409 (name taken), 422...
        // Resending the same event will not change it; the client already retried 429/5xx.
        const error err = api_error("POST event for pod " + pod, resp.value());
        logger()->warn("dropping event pod=\"{}\" reason=TaintManagerEviction: {}", pod,
                       err.message);
        count(&event_recorder_stats::failed);
        co_return;
      }
      if (attempt >= options.max_attempts || is_stopped()) {
        logger()->warn("dropping event pod=\"{}\" after {} attempt(s): {}", pod, attempt,
                       resp.err().message);
        count(&event_recorder_stats::failed);
        co_return;
      }
      retry_timer.expires_after(options.retry_delay);
      co_await retry_timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }

  static asio::awaitable<void> deliver_one(std::shared_ptr<impl> self, pending_event ev,
                                           asio::steady_timer& retry_timer) {
    co_await self->deliver(std::move(ev), retry_timer);
  }

  /// Starts deliveries in queue order while slots are free, then waits for a record() or a
  /// finished delivery. Each delivery owns a reference to the state, so none outlives it.
  static asio::awaitable<void> drain(std::shared_ptr<impl> self) {
    for (;;) {
      while (auto next = self->pop()) {
        const auto timer = self->retry_timers.emplace(self->retry_timers.end(), self->executor);
        asio::co_spawn(self->executor, deliver_one(self, std::move(*next), *timer),
                       [self, timer](const std::exception_ptr& ep) {
                         self->retry_timers.erase(timer);
                         self->delivered();
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
  client& api;
  event_recorder_options options;
  event_clock clock;

  mutable std::mutex mutex;  // Guards everything below it.
  std::deque<pending_event> queue;
  std::list<std::string> lru;
  std::unordered_map<std::string, bucket> buckets;
  event_recorder_stats counters;
  std::uint64_t last_name_nanos = 0;
  std::size_t in_flight = 0;  // Deliveries started and not yet ended.
  bool started = false;
  bool stopped = false;

  // Thread-safe by itself: record() and finished deliveries signal from any thread.
  asio::experimental::concurrent_channel<void(boost::system::error_code)> wake;
  // One retry timer per delivery in flight, removed when it ends; only touched on the
  // executor.
  std::list<asio::steady_timer> retry_timers;
};

event_recorder::event_recorder(asio::any_io_executor executor, client& c,
                               event_recorder_options options, event_clock clock)
    : impl_(std::make_shared<impl>(std::move(executor), c, std::move(options), std::move(clock))) {}

event_recorder::~event_recorder() {
  stop();
}

void event_recorder::start() {
  {
    const std::lock_guard lock(impl_->mutex);
    if (impl_->started || impl_->stopped) {
      return;
    }
    impl_->started = true;
  }
  asio::co_spawn(impl_->executor, impl::drain(impl_),
                 [](const std::exception_ptr& ep) { log_unexpected(ep, "event delivery"); });
}

void event_recorder::stop() {
  {
    const std::lock_guard lock(impl_->mutex);
    if (impl_->stopped) {
      return;
    }
    impl_->stopped = true;
    impl_->counters.dropped_stopped += impl_->queue.size();
    impl_->queue.clear();
  }
  impl_->wake.close();
  asio::post(impl_->executor, [self = impl_] {
    for (auto& timer : self->retry_timers) {
      timer.cancel();
    }
  });
}

bool event_recorder::record(const pod_ref& pod, event_kind kind, std::string_view detail) {
  std::string key = impl_->options.component;
  key += '\0';
  key += pod.namespace_;
  key += '\0';
  key += pod.name;
  key += '\0';
  key += pod.uid;
  {
    const std::lock_guard lock(impl_->mutex);
    if (impl_->stopped) {
      ++impl_->counters.dropped_stopped;
      return false;
    }
    if (!impl_->spam_allow(key)) {
      ++impl_->counters.dropped_spam;
      return false;
    }
    if (impl_->queue.size() >= std::max<std::size_t>(impl_->options.queue_capacity, 1)) {
      ++impl_->counters.dropped_full;
      if (!impl_->options.drop_oldest) {
        return false;
      }
      impl_->queue.pop_front();
    }
    const auto at = impl_->clock.wall();
    impl_->queue.push_back(
        pending_event{pod, kind, std::string(detail), impl_->next_name(pod.name, at), at});
    ++impl_->counters.recorded;
  }
  // A full channel means a wake-up is already pending: nothing to do.
  impl_->wake.try_send(boost::system::error_code{});
  return true;
}

event_recorder_stats event_recorder::stats() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->counters;
}

std::size_t event_recorder::queued() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->queue.size();
}

}  // namespace tec::k8s
