#include "tec/writers/eviction_sink.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "fresh_node_reader.hpp"
#include "lru_map.hpp"
#include "tec/base/logger.hpp"
#include "tec/k8sclient/api_error.hpp"
#include "tec/writers/pod_writer.hpp"

namespace tec::writers {
namespace {

namespace asio = boost::asio;
using controller::eviction_result;
using controller::eviction_status;
using controller::pod_ref;

std::shared_ptr<spdlog::logger> logger() {
  static const std::shared_ptr<spdlog::logger> log = base::named_logger("evict");
  return log;
}

/// True for a failed condition patch worth retrying before deleting (see evict() in the
/// header; 401 while a token is rotated, 408 and 409 ask to retry); false for 403, 404, 410 and
/// every other 4xx, answers that will not change.
bool transient(const base::error& err) {
  if (err.code.category() != base::error_category()) {
    return true;
  }
  switch (static_cast<base::errc>(err.code.value())) {
    case base::errc::forbidden:
    case base::errc::not_found:
    case base::errc::gone:
      return false;
    case base::errc::http_status:
      return err.http_status == 408 || err.http_status < 400 || err.http_status >= 500;
    default:
      return true;
  }
}

bool is_cancelled(const base::error& err) {
  return err.code == base::make_error_code(base::errc::cancelled);
}

/// What the condition patch of one attempt has to be.
enum class condition_patch : std::uint8_t {
  none,             ///< Already there (our True condition): nothing to send.
  now,              ///< Added or flipped to True: lastTransitionTime now.
  keep_transition,  ///< True already (another reason/message): keep its lastTransitionTime.
};

}  // namespace

struct k8s_eviction_sink::impl {
  impl(asio::any_io_executor ex, k8sclient::client& c, event_recorder* ev,
       eviction_sink_options opts)
      : executor(std::move(ex)),
        writer(c),
        events(ev),
        options(std::move(opts)),
        patched(options.remembered_patches) {
    if (options.fresh_node_check) {
      nodes.emplace(executor, c, options.clock != nullptr ? *options.clock : c.clock(),
                    options.fresh_node_window, options.fresh_node_timeout);
    }
  }

  void count_check(std::string_view result) {
    const std::lock_guard lock(mutex);
    ++counters.fresh_node_checks[std::string(result)];
  }

  // The fresh read found none of the request's causes on the node: nothing is written.
  eviction_result taint_gone(const controller::eviction_request& req, const std::string& who) {
    // At most three named: the line and the message stay short whatever the node carries.
    constexpr std::size_t named = 3;
    std::string causes;
    for (std::size_t i = 0; i < req.causes.size() && i < named; ++i) {
      causes += (i == 0 ? "" : ", ") + controller::describe_taint(req.causes[i]);
    }
    if (req.causes.size() > named) {
      causes += " and " + std::to_string(req.causes.size() - named) + " more";
    }
    logger()->info(
        "not evicting pod=\"{}\" uid={}: node=\"{}\" no longer carries {} on the API server "
        "(the cache is behind); retried shortly",
        who, req.pod.uid, req.node, causes);
    count_check("taint_gone");
    return eviction_result{eviction_status::stale,
                           "node " + req.node + " no longer carries " + causes};
  }

  // --fresh-node-check: nullopt to go on, else the attempt's result (`stale`, or cancelled
  // while the read was in flight). See evict() in the header.
  asio::awaitable<std::optional<eviction_result>> check_node(
      const controller::eviction_request& req, const std::string& who) {
    if (!nodes || req.node.empty() || req.causes.empty()) {
      co_return std::nullopt;
    }
    const detail::node_read got = co_await nodes->read(req.node);
    switch (got.what) {
      // Each case in braces (see evict(): clang 14 and a case's temporaries in a coroutine).
      case detail::node_read::kind::found: {
        if (!detail::carries_any(got.taints, req.causes)) {
          co_return taint_gone(req, who);
        }
        count_check("taint_present");
        break;
      }
      case detail::node_read::kind::not_found: {
        logger()->debug("pod=\"{}\": node=\"{}\" is gone (404), evicting as without the check", who,
                        req.node);
        count_check("node_gone");
        break;
      }
      case detail::node_read::kind::failed: {
        if (got.forbidden && !warned_forbidden.exchange(true)) {
          logger()->warn(
              "--fresh-node-check cannot read nodes (403: the ClusterRole needs get on nodes); "
              "evicting without the check: {}",
              got.error);
        }
        logger()->debug("pod=\"{}\": cannot read node=\"{}\", evicting as without the check: {}",
                        who, req.node, got.error);
        count_check("read_failed");
        break;
      }
    }
    if (req.cancelled && req.cancelled()) {
      co_return cancelled_result();  // Cancelled while the read was in flight.
    }
    co_return std::nullopt;
  }

  // Dry-run is on: the attempt ends here, without a write.
  eviction_result would_delete(const pod_ref& pod, const std::string& who) {
    logger()->info("dry run: would delete pod=\"{}\" uid={}", who, pod.uid);
    const std::lock_guard lock(mutex);
    patched.erase(pod.uid);
    ++counters.dry_run_deletions;
    return eviction_result{eviction_status::gone, {}};
  }

  void count(std::uint64_t eviction_sink_stats::*counter) {
    const std::lock_guard lock(mutex);
    ++(counters.*counter);
  }

  // A failed attempt: a warning (debug once the controller reported the eviction as stuck),
  // counted by reason.
  eviction_result failed(const controller::eviction_request& req, const std::string& who,
                         std::string_view what, const base::error& err) {
    logger()->log(req.stuck ? spdlog::level::debug : spdlog::level::warn, "pod=\"{}\": {}: {}", who,
                  what, err.message);
    {
      const std::lock_guard lock(mutex);
      ++counters.failures;
      ++counters.failures_by_reason[k8sclient::error_reason(err)];
    }
    return eviction_result{eviction_status::failed, err.message};
  }

  // The eviction of `uid` is over (done or nothing left to do): nothing to remember.
  void finished(const std::string& uid, bool gone) {
    const std::lock_guard lock(mutex);
    patched.erase(uid);
    if (gone) {
      ++counters.already_gone;
    }
  }

  eviction_result cancelled_result() {
    count(&eviction_sink_stats::cancelled);
    return eviction_result{eviction_status::failed, "cancelled"};
  }

  // Nothing to delete: the pod is gone or replaced (`why`).
  eviction_result gone(const pod_ref& pod, const std::string& who, std::string_view why) {
    logger()->info("pod=\"{}\" uid={} is already gone ({})", who, pod.uid, why);
    finished(pod.uid, true);
    return eviction_result{eviction_status::gone, {}};
  }

  // Upstream's UpdatePodCondition on what we know: our earlier patch for this UID, else the
  // cached pod if it is this UID (a cache that is behind at worst costs a redundant patch).
  // `generation`: the cached pod's metadata.generation (0: unknown or none).
  condition_patch condition_needed(const pod_ref& pod, std::int64_t& generation) {
    {
      const std::lock_guard lock(mutex);
      if (patched.contains(pod.uid)) {
        ++counters.conditions_unchanged;
        return condition_patch::none;
      }
    }
    if (options.pods == nullptr) {
      return condition_patch::now;
    }
    const std::optional<informers::pod_record> cached = options.pods->get(pod.namespace_, pod.name);
    if (!cached || cached->pod.uid != pod.uid) {
      return condition_patch::now;
    }
    generation = cached->generation;
    switch (cached->disruption) {
      case informers::disruption_state::true_ours:
        count(&eviction_sink_stats::conditions_unchanged);
        return condition_patch::none;
      case informers::disruption_state::true_other:
        return condition_patch::keep_transition;
      case informers::disruption_state::absent:
      case informers::disruption_state::not_true:
        break;
    }
    return condition_patch::now;
  }

  // The condition step of an attempt: nullopt to go on with the DELETE, else the attempt's
  // result (gone, cancelled, or a transient failure).
  asio::awaitable<std::optional<eviction_result>> add_condition(
      const controller::eviction_request& req, const std::string& who) {
    const pod_ref& pod = req.pod;
    std::int64_t generation = 0;
    const condition_patch need = condition_needed(pod, generation);
    if (need == condition_patch::none) {
      co_return std::nullopt;
    }
    bool with_generation = false;  // (no co_await in a short-circuit: GCC 12 and clang 14)
    if (generation > 0) {
      with_generation = co_await condition_has_generation();
    }
    auto patched_result = co_await writer.add_disruption_condition(
        pod.namespace_, pod.name, pod.uid, req.cancelled, need == condition_patch::keep_transition,
        with_generation ? std::optional<std::int64_t>(generation) : std::nullopt);
    if (patched_result) {
      if (patched_result.value() == patch_outcome::patched) {
        const std::lock_guard lock(mutex);
        ++counters.conditions_patched;
        if (options.remembered_patches > 0) {
          patched.put(pod.uid, true);
        }
        co_return std::nullopt;
      }
      co_return gone(pod, who,
                     patched_result.value() == patch_outcome::not_found ? "404" : "UID mismatch");
    }
    const base::error& err = patched_result.error();
    if (is_cancelled(err)) {
      co_return cancelled_result();
    }
    if (transient(err)) {
      co_return failed(req, who,
                       "could not add the DisruptionTarget condition, not deleting without it "
                       "(retried)",
                       err);
    }
    logger()->warn(
        "pod=\"{}\": the API refused the DisruptionTarget condition, deleting without it: {}", who,
        err.message);
    const std::lock_guard lock(mutex);
    ++counters.condition_failures;
    ++counters.condition_failures_by_reason[k8sclient::error_reason(err)];
    co_return std::nullopt;
  }

  // Whether the condition gets observedGeneration: discovered once from the server's OpenAPI v3
  // schema (pod_writer::discover_condition_observed_generation) by the first attempt that asks;
  // attempts that ask meanwhile go without it (the field is informative: none waits for a
  // megabyte). A failed discovery is tried again by an attempt 10 minutes later.
  asio::awaitable<bool> condition_has_generation() {
    const auto now = std::chrono::steady_clock::now();
    {
      const std::lock_guard lock(mutex);
      if (generation_support || generation_discovering || now < generation_retry_at) {
        co_return generation_support.value_or(false);
      }
      generation_discovering = true;
    }
    auto found = co_await writer.discover_condition_observed_generation();
    if (found) {
      logger()->info("the DisruptionTarget condition {} observedGeneration (the server's {} {})",
                     *found ? "carries" : "goes without", openapi_v3_core_path,
                     *found ? "has the field" : "has no such field or is not served");
    } else {
      logger()->warn(
          "cannot tell whether pod conditions have observedGeneration, leaving it out "
          "(tried again in 10 minutes): {}",
          found.error().message);
    }
    const std::lock_guard lock(mutex);
    generation_discovering = false;
    if (found) {
      generation_support = *found;
    } else {
      generation_retry_at = std::chrono::steady_clock::now() + std::chrono::minutes(10);
    }
    co_return generation_support.value_or(false);
  }

  // The Eviction API's group/version, found by discovery and kept (a failed discovery fails
  // the attempt, which the queue retries). The first attempts, in flight together, may each
  // ask; one logs the answer.
  asio::awaitable<base::result<std::string>> eviction_version() {
    {
      const std::lock_guard lock(mutex);
      if (!eviction_api.empty()) {
        co_return eviction_api;
      }
    }
    auto found = co_await writer.discover_eviction_version();
    if (found) {
      bool first = false;
      {
        const std::lock_guard lock(mutex);
        first = eviction_api.empty();
        eviction_api = *found;
      }
      if (first) {
        logger()->info("using the Eviction API {}", *found);
      }
    }
    co_return found;
  }

  // An eviction_method::evict attempt: POST the Eviction; a refusal is `blocked`.
  asio::awaitable<eviction_result> evict(const controller::eviction_request& req,
                                         const std::string& who) {
    const pod_ref& pod = req.pod;
    auto version = co_await eviction_version();
    if (!version) {
      co_return failed(req, who, "cannot evict", version.error());
    }
    if (dry_run()) {
      co_return would_delete(pod, who);  // switched on while discovery was in flight
    }
    auto answer =
        co_await writer.evict_pod(pod.namespace_, pod.name, pod.uid, *version, req.cancelled);
    if (!answer) {
      if (is_cancelled(answer.error())) {
        co_return cancelled_result();
      }
      co_return failed(req, who, "eviction failed", answer.error());
    }
    switch (answer->outcome) {
      // Each case in braces: clang 14 destroyed a case's temporaries (the logger) on the path
      // that skipped it (ASan: a misaligned ~shared_ptr at the co_return below).
      case evict_outcome::evicted: {
        logger()->info("evicted pod=\"{}\" uid={} (Eviction API {})", who, pod.uid, *version);
        finished(pod.uid, false);
        count(&eviction_sink_stats::evictions);
        co_return eviction_result{eviction_status::deleted, {}};
      }
      case evict_outcome::blocked: {
        logger()->debug("eviction refused pod=\"{}\" uid={}: {}", who, pod.uid, answer->message);
        count(&eviction_sink_stats::blocked);
        co_return eviction_result{eviction_status::blocked, std::move(answer->message)};
      }
      case evict_outcome::not_found:
      case evict_outcome::uid_mismatch:
        break;
    }
    co_return gone(pod, who,
                   answer->outcome == evict_outcome::not_found ? "404" : "409 UID mismatch");
  }

  asio::awaitable<eviction_result> run(controller::eviction_request req) {
    const pod_ref& pod = req.pod;
    const std::string who = pod.namespace_ + "/" + pod.name;
    if (logger()->should_log(spdlog::level::trace)) {
      logger()->trace("stage=sink pod=\"{}\" t_us={}", who,
                      std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count());
    }
    if (dry_run()) {
      co_return would_delete(pod, who);
    }
    if (auto stop = co_await check_node(req, who)) {
      co_return std::move(*stop);
    }
    if (req.method == controller::eviction_method::evict) {
      co_return co_await evict(req, who);
    }
    if (options.disruption_condition) {
      if (auto stop = co_await add_condition(req, who)) {
        co_return std::move(*stop);
      }
      if (req.cancelled && req.cancelled()) {
        co_return cancelled_result();  // Cancelled while the patch was in flight.
      }
    }
    if (dry_run()) {
      co_return would_delete(pod, who);  // switched on while the patch was in flight
    }
    auto deleted = co_await writer.delete_pod(pod.namespace_, pod.name, pod.uid, req.cancelled);
    if (!deleted) {
      if (is_cancelled(deleted.error())) {
        co_return cancelled_result();
      }
      co_return failed(req, who, "delete failed", deleted.error());
    }
    if (deleted.value() == delete_outcome::deleted) {
      logger()->info("pod=\"{}\" uid={} deleted", who, pod.uid);
      finished(pod.uid, false);
      // The deletion-duration histogram is the controller's (controller_options::on_deleted,
      // from when the eviction was due): the sink only counts.
      count(&eviction_sink_stats::deletions);
      co_return eviction_result{eviction_status::deleted, {}};
    }
    co_return gone(pod, who,
                   deleted.value() == delete_outcome::not_found ? "404" : "409 UID mismatch");
  }

  static eviction_sink_stats initial_counters() {
    eviction_sink_stats s;
    for (const std::string_view r : deletion_failure_reasons) {
      s.failures_by_reason.emplace(r, 0);
    }
    for (const std::string_view r : condition_failure_reasons) {
      s.condition_failures_by_reason.emplace(r, 0);
    }
    for (const std::string_view r : fresh_node_results) {
      s.fresh_node_checks.emplace(r, 0);
    }
    return s;
  }

  asio::any_io_executor executor;
  pod_writer writer;
  event_recorder* events;
  eviction_sink_options options;

  mutable std::mutex mutex;  // Guards the members below.
  // Notified (without the lock) each time an eviction completes; wait_idle() waits on it.
  mutable std::condition_variable idle;
  eviction_sink_stats counters = initial_counters();
  // The UIDs whose condition patch succeeded and whose eviction is not over (the values mean
  // nothing): checked before patching again.
  lru_map<bool> patched;
  std::string eviction_api;  ///< The Eviction API's group/version once discovered.
  /// Whether pod conditions have observedGeneration, once discovered; a discovery in flight;
  /// when a failed one may be tried again.
  std::optional<bool> generation_support;
  bool generation_discovering = false;
  std::chrono::steady_clock::time_point generation_retry_at{};
  bool stopped = false;
  // Whether dry-run is in force now (options.dry_run; never without one). Any thread.
  [[nodiscard]] bool dry_run() const { return options.dry_run && options.dry_run(); }
  /// --fresh-node-check's reads (on the executor only; reads() from any thread); none when off.
  std::optional<detail::fresh_node_reader> nodes;
  std::atomic<bool> warned_forbidden{false};  ///< The 403 of a fresh read was logged once.
};

k8s_eviction_sink::k8s_eviction_sink(asio::any_io_executor executor, k8sclient::client& c,
                                     event_recorder* events, eviction_sink_options options)
    : impl_(std::make_shared<impl>(std::move(executor), c, events, std::move(options))) {}

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
      self->executor, self->run(std::move(request)),
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
        self->idle.notify_all();
        done(std::move(r));
      });
}

void k8s_eviction_sink::record_event(const pod_ref& pod, controller::event_kind kind,
                                     std::string_view detail) {
  if (impl_->dry_run()) {
    impl_->count(&eviction_sink_stats::dry_run_events);
    return;
  }
  if (impl_->events != nullptr) {
    impl_->events->record(pod, kind, detail);
  }
}

void k8s_eviction_sink::eviction_cancelled(const pod_ref& pod) {
  if (!impl_->options.disruption_condition || impl_->dry_run()) {
    return;
  }
  bool ours = false;
  {
    const std::lock_guard lock(impl_->mutex);
    ours = impl_->patched.contains(pod.uid);
    impl_->patched.erase(pod.uid);
  }
  if (!ours && impl_->options.pods != nullptr) {
    const auto cached = impl_->options.pods->get(pod.namespace_, pod.name);
    ours = cached && cached->pod.uid == pod.uid &&
           cached->disruption == informers::disruption_state::true_ours;
  }
  {
    const std::lock_guard lock(impl_->mutex);
    if (!ours || impl_->stopped) {
      return;
    }
    ++impl_->counters.in_flight;
  }
  auto self = impl_;
  asio::co_spawn(
      self->executor,
      [self, pod]() -> asio::awaitable<void> {
        const std::string who = pod.namespace_ + "/" + pod.name;
        auto r =
            co_await self->writer.withdraw_disruption_condition(pod.namespace_, pod.name, pod.uid);
        const std::lock_guard lock(self->mutex);
        if (r && r.value() == patch_outcome::patched) {
          ++self->counters.conditions_withdrawn;
          logger()->info(
              "pod=\"{}\" uid={}: eviction cancelled, DisruptionTarget condition set to False", who,
              pod.uid);
        } else if (!r) {
          ++self->counters.condition_withdrawal_failures;
          logger()->warn(
              "pod=\"{}\" uid={}: eviction cancelled, but its DisruptionTarget condition could not "
              "be withdrawn: {}",
              who, pod.uid, r.error().message);
        }
      },
      [self](const std::exception_ptr& ep) {
        if (ep) {
          try {
            std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            logger()->error("withdrawing a DisruptionTarget condition: unexpected exception: {}",
                            e.what());
          }
        }
        {
          const std::lock_guard lock(self->mutex);
          --self->counters.in_flight;
        }
        self->idle.notify_all();
      });
}

void k8s_eviction_sink::record_node_event(std::string_view node, controller::event_kind kind,
                                          std::string_view detail) {
  if (impl_->dry_run()) {
    impl_->count(&eviction_sink_stats::dry_run_events);
    return;
  }
  if (impl_->events != nullptr) {
    const pod_ref ref{"", std::string(node), ""};
    impl_->events->record(involved_object{.kind = "Node", .ref = ref},
                          make_event_content(ref, kind, detail));
  }
}

void k8s_eviction_sink::stop() {
  const std::lock_guard lock(impl_->mutex);
  impl_->stopped = true;
}

bool k8s_eviction_sink::wait_idle(std::chrono::milliseconds budget) const {
  std::unique_lock lock(impl_->mutex);
  return impl_->idle.wait_for(lock, budget, [this] { return impl_->counters.in_flight == 0; });
}

eviction_sink_stats k8s_eviction_sink::stats() const {
  eviction_sink_stats out;
  {
    const std::lock_guard lock(impl_->mutex);
    out = impl_->counters;
  }
  if (impl_->nodes) {
    out.fresh_node_reads = impl_->nodes->reads();
  }
  return out;
}

metrics::table k8s_eviction_sink::metric_table() const {
  // Each row reads a fresh copy (under the sink's mutex): a scrape is rare, the maps small.
  const auto one = [this](std::uint64_t eviction_sink_stats::*field) {
    return [this, field] { return static_cast<double>(stats().*field); };
  };
  const auto by = [this](std::map<std::string, std::uint64_t> eviction_sink_stats::*field) {
    return [this, field] {
      const eviction_sink_stats s = stats();
      std::vector<metrics::sample> out;
      for (const auto& [label, n] : s.*field) {
        out.push_back({label, static_cast<double>(n)});
      }
      return out;
    };
  };
  return {
      metrics::counter_row("pod_deletions_total", "Pods deleted by the taint eviction controller.",
                           [this] {
                             const auto s = stats();
                             return static_cast<double>(s.deletions + s.evictions);
                           }),
      metrics::counter_row("pod_evictions_total",
                           "Pods evicted through the Eviction API (evictionMode Evict); each is "
                           "also in pod_deletions_total.",
                           one(&eviction_sink_stats::evictions)),
      metrics::counter_row_by("reason", "pod_deletion_failures_total",
                              "Failed pod deletion attempts, by reason.",
                              by(&eviction_sink_stats::failures_by_reason)),
      metrics::counter_row_by("reason", "disruption_condition_failures_total",
                              "DisruptionTarget condition patches that failed permanently (the "
                              "DELETE went ahead without the condition), by reason.",
                              by(&eviction_sink_stats::condition_failures_by_reason)),
      metrics::counter_row_by("result", "fresh_node_checks_total",
                              "Eviction attempts checked on a fresh read of the node "
                              "(--fresh-node-check), by result; taint_gone ones wrote nothing "
                              "and are retried.",
                              by(&eviction_sink_stats::fresh_node_checks)),
      metrics::counter_row("fresh_node_reads_total",
                           "GETs of a node sent for --fresh-node-check (one per node per second "
                           "at most).",
                           one(&eviction_sink_stats::fresh_node_reads)),
      // The controller declares it (it decides dry-run); these are the attempts handed over
      // just before dry-run was switched on (eviction_sink_options::dry_run).
      metrics::counter_row("dry_run_pod_deletions_total", "",
                           one(&eviction_sink_stats::dry_run_deletions)),
  };
}

}  // namespace tec::writers
