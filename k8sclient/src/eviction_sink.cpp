#include "tec/k8s/eviction_sink.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <exception>
#include <mutex>
#include <utility>

#include "tec/k8s/pod_writer.hpp"

namespace tec::k8s {
namespace {

namespace asio = boost::asio;
using controller::eviction_result;
using controller::eviction_status;
using controller::pod_ref;

std::shared_ptr<spdlog::logger> logger() {
  static const std::shared_ptr<spdlog::logger> log = [] {
    auto existing = spdlog::get("evict");
    return existing ? existing : spdlog::default_logger()->clone("evict");
  }();
  return log;
}

}  // namespace

struct k8s_eviction_sink::impl {
  impl(asio::any_io_executor ex, client& c, event_recorder* ev, eviction_sink_options opts,
       steady_clock_fn clock)
      : executor(std::move(ex)), writer(c), events(ev), options(opts), now(std::move(clock)) {}

  void record_failure(const error& err) {
    const std::lock_guard lock(mutex);
    ++counters.failures;
    ++counters.failures_by_reason[error_reason(err)];
  }

  void record_deleted(std::chrono::steady_clock::duration took) {
    const double seconds = std::chrono::duration<double>(took).count();
    const std::lock_guard lock(mutex);
    ++counters.deletions;
    std::size_t slot = 0;
    while (slot < deletion_duration_buckets.size() && seconds > deletion_duration_buckets[slot]) {
      ++slot;
    }
    ++counters.duration_counts[slot];
    counters.duration_sum_seconds += seconds;
    ++counters.duration_count;
  }

  asio::awaitable<eviction_result> run(controller::eviction_request req,
                                       std::chrono::steady_clock::time_point start) {
    const pod_ref& pod = req.pod;
    const std::string who = pod.namespace_ + "/" + pod.name;
    if (options.disruption_condition) {
      auto patched = co_await writer.add_disruption_condition(pod.namespace_, pod.name, pod.uid,
                                                              req.cancelled);
      if (patched && patched.value() != patch_outcome::patched) {
        logger()->info("pod=\"{}\" uid={} is already gone ({}), nothing to delete", who, pod.uid,
                       patched.value() == patch_outcome::not_found ? "404" : "UID mismatch");
        const std::lock_guard lock(mutex);
        ++counters.already_gone;
        co_return eviction_result{eviction_status::gone, {}};
      }
      if (!patched) {
        logger()->warn(
            "pod=\"{}\": could not add the DisruptionTarget condition, deleting "
            "anyway: {}",
            who, patched.err().message);
        const std::lock_guard lock(mutex);
        ++counters.condition_failures;
      }
    }
    auto deleted = co_await writer.delete_pod(pod.namespace_, pod.name, pod.uid, req.cancelled);
    if (!deleted) {
      logger()->warn("pod=\"{}\": delete failed: {}", who, deleted.err().message);
      record_failure(deleted.err());
      co_return eviction_result{eviction_status::failed, deleted.err().message};
    }
    if (deleted.value() == delete_outcome::deleted) {
      logger()->info("pod=\"{}\" uid={} deleted", who, pod.uid);
      record_deleted(now() - start);
      co_return eviction_result{eviction_status::deleted, {}};
    }
    logger()->info("pod=\"{}\" uid={} is already gone ({})", who, pod.uid,
                   deleted.value() == delete_outcome::not_found ? "404" : "409 UID mismatch");
    {
      const std::lock_guard lock(mutex);
      ++counters.already_gone;
    }
    co_return eviction_result{eviction_status::gone, {}};
  }

  asio::any_io_executor executor;
  pod_writer writer;
  event_recorder* events;
  eviction_sink_options options;
  steady_clock_fn now;

  mutable std::mutex mutex;  // Guards the members below.
  eviction_sink_stats counters;
  bool stopped = false;
};

k8s_eviction_sink::k8s_eviction_sink(asio::any_io_executor executor, client& c,
                                     event_recorder* events, eviction_sink_options options,
                                     steady_clock_fn now)
    : impl_(std::make_shared<impl>(std::move(executor), c, events, options, std::move(now))) {}

k8s_eviction_sink::~k8s_eviction_sink() {
  stop();
}

void k8s_eviction_sink::evict(controller::eviction_request request,
                              std::function<void(eviction_result)> done) {
  {
    const std::lock_guard lock(impl_->mutex);
    if (!impl_->stopped) {
      ++impl_->counters.in_flight;
    } else {
      asio::post(impl_->executor, [done = std::move(done)] {
        done(eviction_result{eviction_status::failed, "shutting down"});
      });
      return;
    }
  }
  auto self = impl_;
  pod_ref pod = request.pod;
  asio::co_spawn(
      self->executor, self->run(std::move(request), self->now()),
      [self, pod, done = std::move(done)](const std::exception_ptr& ep, eviction_result r) {
        if (ep) {
          // Only a bug (or bad_alloc) gets here: report it as a failure so the queue retries.
          r = eviction_result{eviction_status::failed, "unexpected exception"};
          try {
            std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            r.error = std::string("unexpected exception: ") + e.what();
          }
          logger()->error("pod=\"{}/{}\": {}", pod.namespace_, pod.name, r.error);
        }
        {
          const std::lock_guard lock(self->mutex);
          --self->counters.in_flight;
        }
        done(std::move(r));
      });
}

void k8s_eviction_sink::record_event(const pod_ref& pod, controller::event_kind kind,
                                     std::string_view detail) {
  if (impl_->events != nullptr) {
    impl_->events->record(pod, kind, detail);
  }
}

void k8s_eviction_sink::stop() {
  const std::lock_guard lock(impl_->mutex);
  impl_->stopped = true;
}

eviction_sink_stats k8s_eviction_sink::stats() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->counters;
}

}  // namespace tec::k8s
