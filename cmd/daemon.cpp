#include "daemon.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <malloc.h>
#include <unistd.h>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/verb.hpp>
#include <cassert>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <pthread.h>
#include <utility>
#include <vector>

#include "activation.hpp"
#include "daemon_endpoints.hpp"
#include "metric_set.hpp"
#include "policy_control.hpp"
#include "shadow_parts.hpp"
#include "tec/admission/webhook.hpp"
#include "tec/admission/webhook_cert_keeper.hpp"
#include "tec/asio/every.hpp"
#include "tec/asio/io_thread.hpp"
#include "tec/asio/signals.hpp"
#include "tec/asio/task_group.hpp"
#include "tec/base/error.hpp"
#include "tec/base/logger.hpp"
#include "tec/base/rfc3339.hpp"
#include "tec/controller/controller.hpp"
#include "tec/informers/controller_feed.hpp"
#include "tec/informers/informers.hpp"
#include "tec/informers/namespaces.hpp"
#include "tec/informers/store.hpp"
#include "tec/k8sclient/api_error.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/config.hpp"
#include "tec/k8sclient/exec_authenticator.hpp"
#include "tec/k8sclient/leader_election.hpp"
#include "tec/k8sclient/tls.hpp"
#include "tec/metrics/metrics.hpp"
#include "tec/metrics/process_metrics.hpp"
#include "tec/policy/policy_file.hpp"
#include "tec/reports/evictions_report.hpp"
#include "tec/reports/history_record.hpp"
#include "tec/serving/http_endpoints.hpp"
#include "tec/serving/tls_credentials.hpp"
#include "tec/shadow/event_watch.hpp"
#include "tec/shadow/shadow_tracker.hpp"
#include "tec/timedqueue/asio_driver.hpp"
#include "tec/version.hpp"
#include "tec/writers/event_recorder.hpp"
#include "tec/writers/eviction_sink.hpp"
#include "webhook_cluster.hpp"

namespace tec::cmd {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// Shutdown budget (SIGTERM to exit well within the 10 s a kubelet usually grants).
constexpr auto release_budget = 4s;        // the lease release PUT
constexpr auto in_flight_budget = 1500ms;  // evictions already sent
constexpr auto drain_budget = 2s;          // the I/O thread running out of work
// How often the policy file is re-read (a ConfigMap update reaches the pod within about a
// minute anyway: the kubelet's sync period plus its cache TTL).
constexpr auto policy_poll_interval = 5s;
// Shadow mode settles what is due this often.
constexpr auto shadow_sweep_interval = 1s;
// How often heap memory freed since the last look is handed back to the kernel (issue 16).
constexpr auto trim_interval = 5s;
// The client of the secure metrics port's reviews: a scrape every few seconds per reader and
// the cache's 10 s make a handful a minute; a flood of unknown tokens waits for this limit (the
// review's 5 s deadline then answers 503) rather than reaching the API server.
constexpr double review_qps = 10.0;
constexpr int review_burst = 20;
constexpr std::size_t review_connections = 2;

std::string describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

// The stages of the daemon's task_group, in the order shutdown stops them: the leader
// election first (it releases the lease while the caches still run), then the watches, then
// the background jobs (the signal wait and the periodic jobs) that keep running until the
// end of shutdown so that a second signal still exits at once.
namespace stage {
constexpr int leadership = 0;
constexpr int watches = 1;
constexpr int background = 2;
}  // namespace stage

// Why and when the process stops: the first stop reason (an exit status) and whether the I/O
// thread ran out of work. Any thread sets; the main thread waits.
class stop_reason {
public:
  // The first call wins.
  void request(int code) {
    {
      const std::lock_guard lock(mutex_);
      if (!code_) {
        code_ = code;
      }
    }
    cv_.notify_all();
  }
  [[nodiscard]] bool requested() const {
    const std::lock_guard lock(mutex_);
    return code_.has_value();
  }
  // Blocks until request() was called; its code.
  int wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return code_.has_value(); });
    return *code_;
  }
  void io_finished() {
    {
      const std::lock_guard lock(mutex_);
      io_done_ = true;
    }
    cv_.notify_all();
  }
  // Until io_finished() or `deadline`; whether the I/O thread finished.
  bool wait_io(steady::time_point deadline) {
    std::unique_lock lock(mutex_);
    return cv_.wait_until(lock, deadline, [this] { return io_done_; });
  }

private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::optional<int> code_;
  bool io_done_ = false;
};

// The I/O thread, the coroutines it runs (owned by `tasks`) and why and when the process
// stops.
class io_runtime {
public:
  io_runtime(asio::io_context& io, std::shared_ptr<spdlog::logger> log)
      : tasks(io.get_executor()), io_(io), log_(std::move(log)), work_(io.get_executor()) {}

  // Main thread: the I/O thread runs the io_context until finish() releases it; an exception
  // that leaves io.run() is logged and stops the process with status 1.
  void start() {
    thread_ = std::thread([this] {
      ::pthread_setname_np(::pthread_self(), "tec-io");
      try {
        io_.run();
      } catch (const std::exception& e) {
        log_->critical("the I/O thread failed: {}", e.what());
        stop.request(1);
      }
      stop.io_finished();
    });
  }

  // Main thread, at the end of shutdown: the I/O thread runs out of work until `deadline`,
  // then is stopped; joined either way.
  void finish(steady::time_point deadline) {
    work_.reset();
    if (!stop.wait_io(deadline)) {
      log_->warn("the I/O thread still had work after {}; stopping it",
                 format_duration(drain_budget));
      io_.stop();
    }
    thread_.join();
  }

  // Main thread, before the I/O thread runs: SIGTERM or SIGINT (registered in `signals`) asks
  // for a clean stop; a second one while stopping exits at once. Watched by a task of the
  // background stage, cancelled late in shutdown.
  void watch_signals(asio::signal_set& signals) {
    spawn_background(async::each_signal(signals, [this](int signo) {
      if (stopping.load() || stop.requested()) {
        log_->warn("received signal {} again during shutdown: exiting at once", signo);
        std::_Exit(1);
      }
      log_->info("received {}: shutting down", signo == SIGTERM ? "SIGTERM" : "SIGINT");
      stop.request(0);
    }));
  }

  // A task of the background stage (cancelled late in shutdown). An exception it throws leaves
  // io.run() (the I/O thread's failure), as it did when the jobs were timer handlers.
  void spawn_background(asio::awaitable<void> job) {
    tasks.spawn(stage::background, std::move(job), [](const std::exception_ptr& e) {
      if (e) {
        std::rethrow_exception(e);
      }
    });
  }
  // `job` every `interval` (async::every) until the first run after shutdown began.
  void every(steady::duration interval, std::function<void()> job) {
    spawn_background(async::every(interval, [this, job = std::move(job)] {
      if (stopping.load()) {
        return false;
      }
      job();
      return true;
    }));
  }

  // An informer's run(), owned by `tasks` (stage watches); shutdown stops them and cancels
  // those still running after the client's shutdown. Its end before shutdown exits.
  template <class Informer>
  void spawn_informer(Informer& informer, const char* what) {
    tasks.spawn(stage::watches, informer.run(), [this, what](const std::exception_ptr& e) {
      if (stopping.load()) {
        // Cancelled by shutdown (operation_aborted) or ended by stop().
        if (e) {
          log_->debug("the {} informer ended: {}", what, describe(e));
        }
      } else if (e) {
        log_->error("the {} informer failed: {}; exiting", what, describe(e));
        stop.request(1);
      } else {
        log_->error("the {} informer ended unexpectedly; exiting", what);
        stop.request(1);
      }
    });
  }

  // The one owner of the coroutines on the I/O thread (their stages: namespace stage). Closed
  // by shutdown: nothing starts after that.
  async::task_group tasks;
  std::atomic<bool> stopping{false};  // shutdown began (set by the main thread)
  stop_reason stop;

private:
  asio::io_context& io_;
  std::shared_ptr<spdlog::logger> log_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
};

// What the informers keep of the cluster. The namespace store says which namespaces opt out
// (the controller's namespace_opted_out); a change of answer reaches `on_opt_out_change` on
// the I/O thread.
struct caches {
  explicit caches(std::function<void(const std::vector<informers::opt_out_change>&)> on_change)
      : namespaces(std::move(on_change)) {}
  informers::pod_store pods;
  informers::node_store nodes;
  informers::namespace_store namespaces;
  shadow::event_store events;  // shadow mode's TaintManagerEviction Events
};

// I/O thread: the namespace informer's LIST failed. A 403 is an upgrade that kept an older
// ClusterRole: say what is missing in one line (instead of the reflector's warning), at every
// retry. The controller is not ready and does not act until the namespaces are listed.
bool namespace_list_failed(spdlog::logger& log, const base::error& e,
                           std::chrono::milliseconds retry_in) {
  if (e.code != make_error_code(base::errc::forbidden)) {
    return false;
  }
  log.error(
      "cannot list namespaces ({}): the ClusterRole needs list and watch on namespaces (for "
      "the {} annotation; apply deploy/rbac.yaml of this version); not ready and not "
      "acting until it can; retrying in {} ms",
      e.message, controller::opt_out_annotation, retry_in.count());
  return true;
}

// The informers over `caches`; their run() coroutines are the task_group's `watches`. Built on
// the main thread; their handlers and on_synced run on the I/O thread.
struct cluster_watches {
  std::optional<informers::pod_informer> pods;
  std::optional<informers::node_informer> nodes;
  std::optional<informers::namespace_informer> namespaces;
  std::optional<shadow::event_informer> events;  // shadow mode only

  // The client, the caches and the gate (which the reflectors' on_synced calls) outlive the
  // informers, as does what the handlers borrow.
  void build(k8sclient::client& api, caches& cache, activation_gate& gate,
             informers::pod_informer::handler on_pod, informers::node_informer::handler on_node,
             bool protobuf, const std::shared_ptr<spdlog::logger>& log) {
    k8sclient::reflector_options pod_opts;
    pod_opts.on_synced = [&gate] { gate.pods_synced(); };
    k8sclient::reflector_options node_opts;
    node_opts.on_synced = [&gate] { gate.nodes_synced(); };
    if (protobuf) {
      pod_opts.accept = informers::protobuf_accept;
      node_opts.accept = informers::protobuf_accept;
    }
    k8sclient::reflector_options namespace_opts;
    namespace_opts.on_synced = [&gate] { gate.namespaces_synced(); };
    namespace_opts.on_list_failed = [log](const base::error& e, std::chrono::milliseconds d) {
      return namespace_list_failed(*log, e, d);
    };
    pods.emplace(api, cache.pods, std::move(on_pod), std::move(pod_opts));
    nodes.emplace(api, cache.nodes, std::move(on_node), std::move(node_opts));
    // The store reports what matters (an answer that changed); no handler needed.
    namespaces.emplace(api, cache.namespaces, nullptr, std::move(namespace_opts));
  }

  // Shadow mode: the TaintManagerEviction Events into `tracker` while `feed` is active. The
  // Events of the first LIST happened before we looked: only later ones count.
  void watch_events(k8sclient::client& api, caches& cache, shadow::shadow_tracker& tracker,
                    const informers::controller_feed& feed) {
    k8sclient::reflector_options event_opts;
    event_opts.query = std::string(shadow::taint_manager_events_query);
    events.emplace(
        api, cache.events,
        [this, &feed, forward = shadow::shadow_event_handler(tracker)](
            const shadow::event_record* old_event, const shadow::event_record* new_event) {
          if (feed.active() && events->has_synced()) {
            forward(old_event, new_event);
          }
        },
        std::move(event_opts));
  }

  // /readyz. Not ready: which first LIST it waits for and, when that LIST has failed, why (the
  // server caps and escapes the reason).
  [[nodiscard]] serving::check_result readiness() const {
    const auto waiting_for = [](std::string_view what, const base::error& e) {
      return serving::check_result{false, "waiting for the first LIST of " + std::string(what) +
                                              (e ? " (last failure: " + e.message + ")" : "")};
    };
    if (!pods->has_synced()) {
      return waiting_for("pods", pods->last_list_error());
    }
    if (!nodes->has_synced()) {
      return waiting_for("nodes", nodes->last_list_error());
    }
    if (!namespaces->has_synced()) {
      return waiting_for("namespaces", namespaces->last_list_error());
    }
    return {};
  }

  // Asks every informer's run() to finish. Any thread.
  void stop() {
    pods->stop();
    nodes->stop();
    namespaces->stop();
    if (events) {
      events->stop();
    }
  }
};

// Who may act: the gate (I/O thread only) says when, the feed gates the informer handlers
// (activated on the I/O thread; deactivated there, and by shutdown from the main thread), and
// the elector campaigns for the lease (none without --leader-elect).
struct leadership {
  std::optional<activation_gate> gate;
  std::optional<informers::controller_feed> feed;  // borrows the controller
  // The elector's own client (two connections, no QPS limit: one request per retry period):
  // on the shared one its renewals waited for a free connection behind a mass eviction's
  // requests queued in the API server, and leadership was lost (BENCHMARKS.md, "API Priority
  // and Fairness"). kube-controller-manager also gives leader election a client of its own.
  std::optional<k8sclient::client> api;
  std::optional<k8sclient::leader_elector> elector;  // borrows api
};

// The Prometheus registry and the standard families in it (shadow mode adds its own).
struct metric_set {
  metrics::registry registry;
  std::optional<metrics::standard_metrics> standard;
};

// What writes to the cluster through the client: Events and evictions.
struct cluster_writers {
  std::optional<writers::event_recorder> recorder;
  std::optional<writers::k8s_eviction_sink> sink;  // records its Events through recorder
};

// The API server's configuration, checked; nullopt (logged) when it cannot be used.
std::optional<k8sclient::rest_config> load_config(const options& opts, spdlog::logger& log) {
  const bool in_cluster = opts.kubeconfig.empty();
  auto config = in_cluster ? k8sclient::load_in_cluster()
                           : k8sclient::load_kubeconfig(opts.kubeconfig, opts.context);
  if (!config) {
    log.error("cannot load the API server configuration: {}{}", config.error().message,
              in_cluster ? " (no --kubeconfig was given, so the in-cluster configuration was "
                           "tried; pass --kubeconfig when running outside a cluster)"
                         : "");
    return std::nullopt;
  }
  // Broken TLS material fails here, once, rather than on every request while /healthz says
  // 200 (the README promises exit 1 for a broken configuration).
  if (const auto bad = k8sclient::check_tls_material(config.value())) {
    log.error("cannot use the API server configuration: {}", bad.message);
    return std::nullopt;
  }
  for (const auto& warning : k8sclient::insecure_settings(config.value())) {
    log.warn("{}", warning);
  }
  // The exec plugin runs once now, on this thread (the I/O thread is not running yet): a plugin
  // that gives no credential is a broken configuration, exit 1, not an error on every request.
  // Later runs (renewal before expiry, after a 401) are the authenticator's, on its own thread.
  if (const auto& exec = config.value().exec) {
    auto first = exec->get();
    if (!first) {
      log.error("cannot get credentials: {}", first.error().message);
      return std::nullopt;
    }
    const auto& c = *first.value().credential;
    log.info("{}: the exec plugin \"{}\" gave {}{}", exec->config().source,
             base::printable(exec->config().command, 256),
             c.token.empty()
                 ? "a client certificate"
                 : (c.client_cert_pem.empty() ? "a bearer token"
                                              : "a bearer token and a client certificate"),
             c.expiry ? ", valid until " + base::format_rfc3339(*c.expiry)
                      : ", with no expiry (renewed after a 401)");
  }
  return std::move(config).value();
}

// What this run does, for the operator: the start line.
void log_start(const options& opts, spdlog::logger& log, const k8sclient::rest_config& cfg) {
  log.info(
      "taint-eviction-controller {} (commit {}) starting: API server {}://{}:{}{} ({}), {} "
      "workers, QPS {} burst {}, DisruptionTarget condition {}, fresh node check {}",
      tec::version, tec::commit, cfg.tls ? "https" : "http", cfg.host, cfg.port, cfg.base_path,
      cfg.source, opts.workers, opts.kube_api_qps, opts.kube_api_burst,
      opts.disruption_condition ? "on" : "off", opts.fresh_node_check ? "on" : "off");
}

// The policy in force at start, shadow mode, dry-run.
void log_modes(const options& opts, spdlog::logger& log,
               const controller::eviction_policy& start_policy) {
  if (opts.policy_file.empty()) {
    log.info("eviction policy: none (upstream's behaviour){}",
             start_policy.dry_run ? ", dry-run on (--dry-run)" : "");
  } else {
    log.info("eviction policy from {} (re-read every {}): {}",
             base::printable(opts.policy_file, 256), format_duration(policy_poll_interval),
             policy::describe(start_policy));
  }
  if (opts.shadow) {
    log.warn(
        "SHADOW MODE: dry-run, and our would-be evictions are compared with what the "
        "built-in taint manager does to the same pods (window {}; "
        "taint_eviction_controller_shadow_* metrics, /debug/shadow on the metrics port)",
        format_duration(opts.shadow_window));
  }
  if (start_policy.dry_run) {
    log.warn(
        "DRY RUN: no pod is patched or deleted and no event is written; the log says "
        "\"would delete\" for each eviction decided");
  }
}

}  // namespace

// Owns every long-lived object of the process, once each, in the order they are destroyed
// (last first); the wiring's callbacks refer to each other through it. The coroutines it runs
// on the I/O thread (informers, leader election, signal wait, periodic jobs) are owned by
// `process.tasks`, which shutdown() stops in stages.
struct daemon::impl {
  explicit impl(options o) : opts(std::move(o)), log(spdlog::default_logger()) {}

  options opts;
  std::shared_ptr<spdlog::logger> log;

  // Declared first, destroyed last: everything below posts to it or holds its executor.
  // The watches and what they feed (the I/O thread, run by `process`): decoding every watch
  // event, the caches, activation, the policy, shadow mode.
  asio::io_context io{1};
  // The evictions: the timed queue's timer and its due work, the eviction sink and the event
  // recorder, on a client of their own. No watch event is decoded here: a due eviction never
  // waits behind the decoding of the watch events its own deletions cause (a mass eviction's
  // stream), and under CPU contention the two jobs are two runnable threads, not one.
  async::io_thread evictions{"tec-evict"};
  // The secure and probe ports (TLS handshakes, authentication, the webhook, /metrics, the
  // probes) and the reviews' client: a request, however costly, never runs on the control
  // loop's thread, nor delays a renewal of the lease.
  async::io_thread serving{"tec-serving"};
  // Leader election and its own client: a renewal waits behind nothing else.
  async::io_thread election{"tec-election"};
  async::task_group election_tasks{election.executor()};
  metric_set metrics;
  shadow_parts shadow_mode;                     // before everything that feeds it
  std::optional<k8sclient::client> api;         // the informers, the policy ConfigMap, certificates
  std::optional<k8sclient::client> writes_api;  // the evictions' DELETEs, PATCHes and Events
  // The TokenReviews and SubjectAccessReviews of the secure metrics port, on a client of their
  // own: its QPS limit and connections are not the evictions' (a flood of requests with
  // unknown tokens must not delay a DELETE), and bound what such a flood costs the API server.
  std::optional<k8sclient::client> review_api;
  caches cache{[this](const std::vector<informers::opt_out_change>& changes) {
    namespaces_changed(changes);
  }};
  std::optional<timedqueue::asio_driver> driver;
  cluster_writers out;  // borrow api and cache.pods
  // Before ctrl, whose workers call its breaker_event(), and after what it borrows.
  std::optional<policy_control> policy_ctl;
  // The eviction history (--history-size), fed by ctrl's outcome observer.
  std::optional<reports::eviction_history> history;
  std::shared_ptr<spdlog::logger> history_log = base::named_logger("history");
  std::optional<controller::controller> ctrl;  // borrows cache.pods, out.sink, driver
  leadership lead;
  // The informers' handlers borrow lead (they run on the I/O thread, joined first).
  cluster_watches watches;
  std::optional<webhook_cluster> webhook;  // borrows cache, ctrl and watches
  std::optional<daemon_endpoints> endpoints;
  // --webhook-cert-secret: the webhook's certificate (borrows api; shares the secure port's
  // credentials).
  std::optional<admission::webhook_cert_keeper> webhook_certs;
  io_runtime process{io, log};

  void build(const k8sclient::rest_config& config) {
    // Read on the HTTP server's thread at each scrape; everything read outlives the servers.
    metrics::register_process_metrics(metrics.registry);
    metrics.standard.emplace(metrics::register_standard_metrics(
        metrics.registry, {tec::version, tec::commit, tec::compiler}));
    api.emplace(io.get_executor(), config, client_options());
    if (opts.metrics_secure) {
      // Not in api_requests_total, which counts the controller's own work (shadow mode's "no
      // write" is read from it): these POSTs are the scrapers' reviews, not cluster writes.
      k8sclient::client_options ropts = client_options();
      ropts.observer = nullptr;
      ropts.qps = review_qps;
      ropts.burst = review_burst;
      ropts.max_connections = review_connections;
      ropts.user_agent += " reviews";
      review_api.emplace(serving.executor(), config, std::move(ropts));
    }
    // Its own QPS limit and connections, as each controller of kube-controller-manager has a
    // client of its own beside the shared informers' one.
    writes_api.emplace(evictions.executor(), config, client_options());
    driver.emplace(evictions.executor(), evictions.executor());
    out.recorder.emplace(evictions.executor(), *writes_api);
    const controller::eviction_policy start_policy = opts.effective_policy(opts.policy);
    out.sink.emplace(
        evictions.executor(), *writes_api, &*out.recorder,
        writers::eviction_sink_options{.disruption_condition = opts.disruption_condition,
                                       .pods = &cache.pods,
                                       // The controller's switch (one dry-run); the sink
                                       // acts only for the controller, built just below.
                                       .dry_run = [this] { return ctrl && ctrl->dry_run(); },
                                       .fresh_node_check = opts.fresh_node_check});
    policy_ctl.emplace(opts, log, process.stopping, *api, *out.recorder, *metrics.standard);
    if (opts.history_size > 0) {
      history.emplace(static_cast<std::size_t>(opts.history_size));
    }
    ctrl.emplace(cache.pods, *out.sink, *driver, controller_options(start_policy));
    policy_ctl->attach(*ctrl);
    if (opts.shadow) {
      // The controller's observer reaches the tracker only once the controller acts.
      shadow_mode.build(metrics.registry, opts.shadow_window, *ctrl);
    }
    lead.feed.emplace(*ctrl);
    lead.gate.emplace(
        [this] {
          log->info("caches synced: {} nodes, {} pods, {} namespaces ({} opted out)",
                    cache.nodes.size(), cache.pods.size(), cache.namespaces.size(),
                    cache.namespaces.opted_out_namespaces().size());
          start_election();
        },
        [this] { activate(); });
    auto on_pod = lead.feed->pod_handler();
    if (opts.shadow) {
      watches.watch_events(*api, cache, *shadow_mode.tracker, *lead.feed);
      on_pod = shadow_mode.compare_pods(*lead.feed, std::move(on_pod));
    }
    watches.build(*api, cache, *lead.gate, std::move(on_pod), lead.feed->node_handler(),
                  opts.protobuf, log);
    // What the libraries count, each declared beside its counting; read at each scrape (on
    // the serving thread), everything read outlives the servers.
    cmd::publish_metric_set(
        metrics.registry,
        {.ctrl = *ctrl,
         .sink = *out.sink,
         .recorder = *out.recorder,
         .watched = {{"pods", [this] { return watches.pods->stats(); }},
                     {"nodes", [this] { return watches.nodes->stats(); }},
                     {"namespaces", [this] { return watches.namespaces->stats(); }}}});
    if (opts.leader_elect) {
      build_elector(config);
    }
    webhook.emplace(cache.pods, cache.nodes, cache.namespaces, *ctrl,
                    [this]() -> std::optional<std::string> {
                      auto ready = watches.readiness();
                      if (ready.ok) {
                        return std::nullopt;
                      }
                      return std::move(ready.message);
                    });
    endpoints.emplace(
        daemon_endpoints::sources{.registry = metrics.registry,
                                  .reviews = review_api ? &*review_api : nullptr,
                                  .elector = lead.elector ? &*lead.elector : nullptr,
                                  .readiness = [this] { return watches.readiness(); },
                                  .shadow = shadow_mode.tracker ? &*shadow_mode.tracker : nullptr,
                                  .ctrl = *ctrl,
                                  .feed = *lead.feed,
                                  .driver = *driver,
                                  .webhook = *webhook,
                                  .history = history ? &*history : nullptr});
  }

  k8sclient::client_options client_options() const {
    k8sclient::client_options copts;
    copts.qps = opts.kube_api_qps;
    copts.burst = opts.kube_api_burst;
    copts.max_connections = static_cast<std::size_t>(opts.kube_api_connections);
    // Slow start from 4 requests after an idle second, not the client's 16: 500 DELETEs due at
    // once on a contended machine (two busy loops) got their first deletion in 15.5 ms (median
    // of 6) instead of 22.5 ms, the API server sharing its CPU among fewer at first; the mass
    // eviction's rate unchanged (BENCHMARKS.md, "9. Contention").
    copts.initial_plain_window = 4;
    copts.user_agent = std::string("taint-eviction-controller/") + tec::version;
    copts.observer = [m = *metrics.standard](boost::beast::http::verb verb, unsigned status,
                                             std::chrono::nanoseconds latency) {
      const auto v = boost::beast::http::to_string(verb);
      const std::string_view verb_label(v.data(), v.size());
      const std::string code = status == 0 ? std::string("<error>") : std::to_string(status);
      m.api_requests.with({verb_label, code}).inc();
      m.api_request_duration.with({verb_label})
          .observe(std::chrono::duration<double>(latency).count());
    };
    return copts;
  }

  controller::controller_options controller_options(
      const controller::eviction_policy& start_policy) {
    controller::controller_options ctl;
    ctl.workers = static_cast<std::size_t>(opts.workers);
    ctl.threaded = true;
    // pod_deletions_total counts 2xx DELETEs (the sink's table); the histogram the same
    // accepted DELETEs (not pods found already gone), from their due time.
    ctl.on_deleted = [m = *metrics.standard](std::chrono::nanoseconds due_to_deleted) {
      m.pod_deletion_duration.observe(std::chrono::duration<double>(due_to_deleted).count());
    };
    ctl.on_waited = [m = *metrics.standard](std::chrono::nanoseconds waited) {
      m.eviction_wait_duration.observe(std::chrono::duration<double>(waited).count());
    };
    ctl.on_breaker = [this](bool open, std::size_t tainted, std::size_t known) {
      policy_ctl->breaker_event(open, tainted, known, std::nullopt);
    };
    ctl.policy = start_policy;
    ctl.deadlines_from_taint_time = opts.deadlines_from_taint_time;
    // From the workers: a shared lock on the namespace cache.
    ctl.namespace_opted_out = [this](std::string_view ns) {
      return cache.namespaces.opted_out(ns);
    };
    ctl.scheduled_events = opts.scheduled_events;
    if (history) {
      // From the workers, the driver and the sink: one JSON line and a copy into the ring
      // (its short lock).
      ctl.on_outcome = [this](const controller::eviction_outcome& o) {
        const base::clock_bridge clock(driver->now(), base::wall_clock::now());
        reports::history_record rec = reports::clipped(reports::history_record_of(o, clock));
        if (history_log->should_log(spdlog::level::info)) {
          history_log->info("{}", reports::to_json(rec));
        }
        history->add(std::move(rec));
      };
    }
    if (opts.shadow) {
      // From the workers and the driver: the tracker takes a short lock.
      ctl.on_decision = [this](const controller::decision_note& note) {
        shadow_mode.tracker->note(shadow::to_shadow_note(note, shadow_mode.clock));
      };
    }
    return ctl;
  }

  void build_elector(const k8sclient::rest_config& config) {
    k8sclient::client_options copts = client_options();
    copts.qps = 0;
    copts.max_connections = 2;
    copts.user_agent += " leader-election";
    lead.api.emplace(election.executor(), config, std::move(copts));
    k8sclient::leader_election_config le;
    le.lease_namespace = opts.lease_namespace;
    le.lease_name = opts.lease_name;
    le.lease_duration = opts.lease_duration;
    le.renew_deadline = opts.renew_deadline;
    le.retry_period = opts.retry_period;
    le.release_on_cancel = true;
    // The elector's callbacks run on the election thread; the gate is the I/O thread's. Both
    // are posted there in the order they happen, so a lease won and lost at once never
    // activates after the loss. A loss also stops acting at once, from here: the feed and the
    // sink may be stopped from any thread.
    le.on_started_leading = [this] {
      metrics.standard->is_leader.set(1);
      log->info("became the leader (lease {}/{}); acting", opts.lease_namespace, opts.lease_name);
      asio::post(io, [this] { lead.gate->may_lead(); });
    };
    le.on_stopped_leading = [this] { stopped_leading(); };
    lead.elector.emplace(election.executor(), *lead.api, std::move(le));
  }

  // I/O thread, when the caches are synced (the gate's first callback): campaign for the
  // lease. Not before: a replica whose caches never sync (an old ClusterRole, a resource it
  // cannot list) must not hold the lease, or nobody would act while the other replica could.
  void start_election() {
    if (!lead.elector) {
      return;
    }
    // Refused once shutdown closed the group (then the elector never runs). Otherwise owned
    // by `process.tasks` (stage leadership): shutdown asks it to release the lease (stop()),
    // and cancels it only when it is still running after the client's shutdown. A stop()
    // that came first makes run() return at once.
    election_tasks.spawn(stage::leadership, lead.elector->run(),
                         [this](const std::exception_ptr& e, bool clean) {
                           if (e && !process.stopping.load()) {
                             log->error("leader election failed: {}; exiting", describe(e));
                             process.stop.request(1);
                           } else if (!e && !clean && !process.stopping.load()) {
                             process.stop.request(1);
                           }
                         });
  }

  // The periodic jobs, each an every() in the task_group's background stage (cancelled by
  // shutdown).
  void start_periodic_jobs() {
    if (!opts.policy_file.empty()) {
      // Re-reads the policy file off the I/O thread; the result comes back to it.
      policy_ctl->watch_file();
      process.spawn_background(
          async::every(policy_poll_interval, [this] { return policy_ctl->poll(); }));
    }
    // Gives the heap that has been freed back to the kernel. glibc keeps what a burst of work
    // freed (the initial LIST's pages, a relist, a mass eviction's requests) in its arenas,
    // fragmented between the live records, so RSS stays at the burst's peak: at 50,000 pods
    // that was most of the RSS (issue 16, BENCHMARKS.md). malloc_trim walks the free chunks
    // only (a few ms at that size).
    process.every(trim_interval, [] { ::malloc_trim(0); });
    if (shadow_mode.tracker) {
      // Settles shadow mode's due pods.
      process.every(shadow_sweep_interval, [this] { shadow_mode.sweep(); });
    }
  }

  // Main thread, after the endpoints started: --webhook-cert-secret's keeper, when the secure
  // port serves a certificate of ours (not --tls-cert-file's: the operator manages that one).
  void start_webhook_certs() {
    if (opts.webhook_cert_secret_name.empty()) {
      return;
    }
    const auto tls = endpoints->serving_credentials();
    if (!opts.tls_cert_file.empty() || tls == nullptr) {
      log->warn(
          "--webhook-cert-secret is ignored: {}; the Secret and the caBundle of {} are left as "
          "they are",
          tls == nullptr ? "there is no secure port (--metrics-secure=false or "
                           "--metrics-bind-address=0)"
                         : "the secure port serves --tls-cert-file's certificate",
          opts.webhook_configuration);
      return;
    }
    const std::string& ns = opts.webhook_service_namespace;
    const std::string& svc = opts.webhook_service_name;
    admission::webhook_cert_keeper_options ko{
        .secret_namespace = opts.webhook_cert_secret_namespace,
        .secret_name = opts.webhook_cert_secret_name,
        .webhook_configuration = opts.webhook_configuration,
        .policy = {.dns_names = {svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"}},
        .check_interval = opts.webhook_cert_check_interval,
        .retry_interval =
            std::min<std::chrono::milliseconds>(opts.webhook_cert_check_interval, 1min)};
    log->info(
        "webhook certificate: kept in Secret {}/{} for {}.{}.svc, checked at start and every "
        "{}; the caBundle of ValidatingWebhookConfiguration {} follows its CA",
        ko.secret_namespace, ko.secret_name, svc, ns, format_duration(ko.check_interval),
        ko.webhook_configuration);
    webhook_certs.emplace(admission::make_api_webhook_cert_backend(
                              *api, ko.secret_namespace, ko.secret_name, ko.webhook_configuration),
                          tls, *base::real_clock(), std::move(ko));
    process.spawn_background(async::repeat([this] { return check_webhook_certs(); }));
  }

  // I/O thread: one check of the webhook's certificate; the wait until the next one.
  asio::awaitable<steady::duration> check_webhook_certs() {
    const auto done = co_await webhook_certs->check();
    co_return done.next_check;
  }

  // I/O thread (the namespace informer's store): namespaces that opt out of eviction, or no
  // longer do. While acting, every pod on a tainted node is decided again: a pending eviction
  // in a namespace that now opts out is cancelled, and pods of one that no longer does are
  // scheduled. Before acting nothing is needed: activation replays every pod.
  void namespaces_changed(const std::vector<informers::opt_out_change>& changes) {
    constexpr std::size_t most_logged = 20;
    for (std::size_t i = 0; i < changes.size() && i < most_logged; ++i) {
      const auto& c = changes[i];
      if (c.opted_out) {
        log->info(
            "namespace=\"{}\" opts out of taint eviction ({}: \"{}\"): its pods are not "
            "evicted",
            c.namespace_, controller::opt_out_annotation, controller::opt_out_value);
      } else {
        log->info(
            "namespace=\"{}\" no longer opts out of taint eviction (annotation removed or "
            "namespace deleted)",
            c.namespace_);
      }
    }
    if (changes.size() > most_logged) {
      log->info("... and {} more namespaces changed their taint-eviction opt-out",
                changes.size() - most_logged);
    }
    if (lead.feed->active()) {
      ctrl->redecide_all();
    }
  }

  // Election thread: the elector gave up the lease (stop()) or lost it. The gate is closed on
  // the I/O thread, after a may_lead() posted before; the rest may be called from any thread.
  void stopped_leading() {
    metrics.standard->is_leader.set(0);
    lead.feed->deactivate();
    asio::post(io, [this] { lead.gate->close(); });
    if (process.stopping.load()) {
      return;
    }
    // Stop acting at once: another process may already be leading. Evictions in flight are
    // abandoned by the shutdown that follows; the next leader decides them afresh. The
    // recorder's channel lives on the evictions' thread.
    out.sink->stop();
    asio::post(evictions.executor(), [this] { out.recorder->stop(); });
    log->error(
        "lost the leader lease {}/{}: stopped acting; exiting with status 1 so the "
        "process restarts as a follower",
        opts.lease_namespace, opts.lease_name);
    process.stop.request(1);
  }

  // I/O thread, from the gate: we may lead and both caches hold a full LIST. The replay runs
  // on the I/O thread, which also runs the informer handlers, so no event slips between the
  // snapshot and the handlers starting to forward.
  void activate() {
    if (process.stopping.load()) {
      return;  // shutdown began and its lead.gate->close() has not run yet: never start acting now
    }
    ctrl->start();
    if (!opts.leader_elect) {
      metrics.standard->is_leader.set(1);
    }
    const auto replayed = lead.feed->activate(cache.nodes, cache.pods);
    ::malloc_trim(0);  // what the LISTs and the replay freed; the trim job does the rest later
    log->info(
        "acting: replayed {} nodes ({} with NoExecute taints) and the {} pods on those from the "
        "caches",
        replayed.nodes, replayed.tainted_nodes, replayed.pods);
  }

  // Main thread, before the I/O thread runs: every coroutine into `process.tasks`, then
  // leadership.
  void start_tasks(asio::signal_set& signals) {
    process.watch_signals(signals);
    out.recorder->start();
    start_periodic_jobs();
    process.spawn_informer(*watches.nodes, "node");
    process.spawn_informer(*watches.pods, "pod");
    process.spawn_informer(*watches.namespaces, "namespace");
    if (watches.events) {
      process.spawn_informer(*watches.events, "event");
    }
    if (lead.elector) {
      log->info(
          "leader election: lease {}/{} as {} (duration {}, renew deadline {}, retry {}); "
          "campaigning once the caches are synced",
          opts.lease_namespace, opts.lease_name, lead.elector->identity(),
          format_duration(opts.lease_duration), format_duration(opts.renew_deadline),
          format_duration(opts.retry_period));
    } else {
      log->warn(
          "leader election is off (--leader-elect=false): acting as soon as the caches "
          "are synced; run one replica only");
      asio::post(io, [this] { lead.gate->may_lead(); });
    }
  }

  int run() {
    const auto cfg = load_config(opts, *log);
    if (!cfg) {
      return 1;
    }
    log_start(opts, *log, *cfg);
    // Pod labels cost memory and only a policy's podSelector reads them; a policy file can
    // gain a selector on reload, so they are kept whenever one is configured.
    informers::keep_pod_labels(!opts.policy_file.empty());
    build(*cfg);
    log_modes(opts, *log, ctrl->policy());
    if (auto e = endpoints->start(serving.executor(), opts, *log); !e.empty()) {
      log->error("{}", e);
      endpoints->stop();
      return 1;
    }
    // Registered here, before the I/O thread runs; watched by a coroutine of `process.tasks`.
    asio::signal_set signals(io, SIGINT, SIGTERM);
    start_tasks(signals);
    start_webhook_certs();
    process.start();
    for (auto* t : {&evictions, &serving, &election}) {
      t->start([this](const std::exception& e) {
        log->critical("a thread of the daemon failed: {}; exiting", e.what());
        process.stop.request(1);
      });
    }
    const int code = process.stop.wait();
    shutdown(code);
    return code;
  }

  // Main thread. Stop acting, release the lease, abandon what is left, stop the threads.
  // The coroutines end on their stop() and the client's shutdown; the owner cancels those
  // still running after that (not before: a request must not be torn down under the client's
  // own shutdown, and the lease release must get its budget).
  void shutdown(int code) {
    const auto started = steady::now();
    process.stopping = true;
    process.tasks.close();
    election_tasks.close();  // a campaign the caches' sync would start now never starts
    lead.feed->deactivate();
    out.sink->stop();
    asio::post(io, [this] { lead.gate->close(); });
    // The recorder's channel lives on the evictions' thread.
    asio::post(evictions.executor(), [this] { out.recorder->stop(); });
    if (lead.elector) {
      lead.elector->stop();
      if (!election_tasks.wait_idle(stage::leadership, steady::now() + release_budget)) {
        log->warn(
            "could not release the leader lease within {}; another replica takes over "
            "after the lease duration",
            format_duration(release_budget));
      }
    }
    if (!out.sink->wait_idle(in_flight_budget)) {
      log->warn(
          "abandoning {} eviction request(s) in flight; the next leader decides those "
          "pods again",
          out.sink->stats().in_flight);
    }
    watches.stop();
    endpoints->stop();
    endpoints->join_reports();
    policy_ctl->join_reader();
    process.tasks.cancel(stage::background);  // the signal wait and the periodic jobs
    api->shutdown();
    writes_api->shutdown();
    if (lead.api) {
      lead.api->shutdown();
    }
    if (review_api) {
      review_api->shutdown();
    }
    // The sink's pending done() calls come from the evictions' thread, still running.
    ctrl->shutdown();
    const auto drain_deadline = steady::now() + drain_budget;
    if (!process.tasks.wait_idle(stage::watches, drain_deadline) ||
        !election_tasks.wait_idle(stage::leadership, drain_deadline)) {
      log->warn(
          "cancelling the informers and the leader election, still running after the "
          "client's shutdown");
      // Posted after the client's shutdown, which was posted before.
      process.tasks.cancel(stage::watches);
      election_tasks.cancel(stage::leadership);
    }
    process.finish(drain_deadline);
    const bool evicted = evictions.finish(drain_deadline);
    const bool served = serving.finish(drain_deadline);
    const bool elected = election.finish(drain_deadline);
    if (!evicted || !served || !elected) {
      log->warn("the evictions', serving or election thread still had work after {}; stopped it",
                format_duration(drain_budget));
    }
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - started).count();
    log->info("stopped in {} ms (exit status {})", ms, code);
  }
};

daemon::daemon(options opts) : impl_(std::make_unique<impl>(std::move(opts))) {}

daemon::~daemon() = default;

int daemon::run() {
  return impl_->run();
}

}  // namespace tec::cmd
