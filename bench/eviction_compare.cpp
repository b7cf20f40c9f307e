// eviction_compare: kube-controller-manager's NoExecute taint manager and ours, side by side,
// one after the other on one API server, in one run (issue 7). BENCHMARKS.md explains the
// scenarios and the figures; bench/compare.sh brings up the cluster and calls this program.
//
//   eviction_compare --kubeconfig PATH --kcm PATH --tec PATH [--out-dir DIR] [--quick] ...
//
// The program is the only client that writes: it seeds nodes and pods, starts one controller
// at a time as a child process, writes the taints, and watches pods (one informer) to time
// the moment each pod gets its deletionTimestamp. A controller counts as started once it has
// evicted a canary pod on a tainted node (so its caches are synced and it acts). Between
// scenarios everything it created is deleted (pods with gracePeriodSeconds=0: there is no
// kubelet).
//
// Single-threaded: the informer, the requests and the bookkeeping run on one io_context on
// the main thread. Every wait is bounded; a scenario that fails is reported as such and the
// run goes on (a timed run, timer or burst, is first tried up to three times: on a loaded
// machine the bench's own writes can spoil a run). Exit status: 0 all scenarios ran, 1 one failed,
// 2 bad usage.

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bench_support.hpp"
#include "tec/base/result.hpp"
#include "tec/base/rfc3339.hpp"
#include "tec/informers/informers.hpp"
#include "tec/informers/store.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/config.hpp"
#include "tec/writers/event_recorder.hpp"
#include "tec/writers/pod_writer.hpp"

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace informers = tec::informers;
namespace writers = tec::writers;
namespace k8sclient = tec::k8sclient;
namespace base = tec::base;
namespace tb = tec::bench;
using nlohmann::json;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr const char* bench_label = "tec-bench";
constexpr const char* canary_taint = "tec-bench/canary";

struct options {
  std::string kubeconfig;
  std::string kcm;
  std::string tec;
  /// Another build of ours (e.g. main before a change), run as controller "tec-base" with the
  /// same flags as "tec", so a change is measured before and after in one run.
  std::string tec_base;
  std::vector<std::string> tec_args;  ///< Appended to every taint-eviction-controller command.
  std::string out_dir = "build/bench";
  std::string cluster_dir;  ///< deploy/local/cluster.sh state: kube-apiserver.pid, etcd.pid
  std::string ns = "tec-bench";
  std::vector<std::string> scenarios{"latency", "floor",        "mass",  "timer",
                                     "burst",   "mass-default", "memory"};
  std::vector<std::string> controllers{"kcm", "tec", "tec+cond"};
  double default_qps = 20;
  int default_burst = 30;
  double lifted_qps = 100'000;
  int lifted_burst = 100'000;
  int latency_runs = 30;
  /// The latency runs in this many interleaved blocks (KCM, ours, ours, KCM, ...), each a
  /// controller started afresh, their samples pooled: a slow spell of a shared machine then
  /// falls on both (with one block, all of KCM's runs came before all of ours).
  int latency_blocks = 1;
  /// Idle time between a latency run's pod being seen and its taint (issue 16: an independent
  /// harness with 1-2 s gaps and the limits lifted saw what 200 ms at QPS 20 did not).
  int latency_gap_ms = 200;
  bool latency_lifted = false;  ///< The latency scenario at lifted_qps/lifted_burst.
  int mass_nodes = 50;
  int mass_pods_per_node = 100;
  int mass_repeat = 3;  ///< Interleaved repetitions of the mass eviction with limits lifted
  int default_qps_pods_per_node = 100;
  // One pod per node and the taints 10 ms apart: 500 due times spread over 5 s, so the figure
  // is the timer's error and not the API server's time to clear a burst (scenario 2 does that).
  int timer_nodes = 500;
  int timer_pods_per_node = 1;
  int timer_seconds = 5;
  int timer_spacing_ms = 10;
  // The burst (issue 30): one node, all its pods tolerating the taint for the same time, so
  // every eviction is due at the same instant: how soon the first deletion leaves, and how
  // the rest follow. Repeated interleaved (KCM, ours, ours, KCM, ...); the median run by p99.
  int burst_pods = 500;
  int burst_repeat = 2;
  /// Interleaved repetitions of the timer scenario (3), as the burst's: one API server stall of
  /// tens of ms in a 2-second run is its p99 (a traced run showed the DELETE on the wire within
  /// 0.4 ms of due and answered 62 ms later); the median run by p99 is reported.
  int timer_repeat = 1;
  int memory_nodes = 500;
  std::vector<long> memory_pods{5'000, 50'000};
  int memory_settle_seconds = 10;
  std::vector<long> floor_concurrency{8, 32, 128};
  // Scenario 7 (issue 16): Kubernetes' documented limit, 5,000 nodes and 150,000 pods.
  int scale_nodes = 5'000;
  std::vector<long> scale_pods{50'000, 150'000};
  int scale_outage_nodes = 1'000;
  int scale_toleration_seconds = 30;
  int scale_churn_rate = 200;
  int scale_churn_seconds = 60;
  bool scale_lifted = false;  ///< The controllers at lifted_qps/lifted_burst, not the default.
  /// kube-controller-manager's node monitor on during the scale scenario (off by default).
  bool scale_kcm_monitor = false;
  /// Leave the scale scenario's nodes and pods in the cluster (to profile a controller by hand).
  bool scale_keep = false;
  /// Sync measurements per controller and size, interleaved (the median is reported).
  int scale_sync_repeat = 2;
  /// A shell command that restarts the control plane on the same address and credentials
  /// (bench/compare.sh: cluster.sh down, then up); run after seeding each size of the scale
  /// scenario, before its sync measurements. Empty: the server is not restarted.
  std::string restart_apiserver;
  long seed_concurrency = 32;
  bool quick = false;
  // The API Priority and Fairness scenario (issue 31, bench/apf_setup.sh): each controller
  // under its own in-cluster identity while FLOWS noisy LIST loops keep workload-low busy, the
  // noise from each of these many service accounts in turn.
  std::vector<long> apf_accounts{80, 1};
  int apf_flows = 80;
  long apf_noise_pods = 5'000;
  int apf_latency_runs = 20;
  int apf_wait_seconds = 30;
  int apf_mass_nodes = 10;
  int apf_mass_pods_per_node = 100;
  int apf_repeat = 1;           ///< Interleaved (KCM, ours with, ours without, then reversed, ...).
  int apf_settle_seconds = 10;  ///< Noise running before the first measurement.
};

/// One way of running a controller.
struct variant {
  std::string id;     ///< "kcm", "tec", "tec+cond", "tec-base"
  std::string label;  ///< For the table.
};

std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", seconds * 1e3);
  return buf;
}

std::string fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

/// The run with the median `key` (the lower middle one for an even count; failed runs sort
/// first), with every run's `key` listed under "runs".
json median_run(const std::vector<json>& runs, const char* key) {
  std::vector<std::pair<double, std::size_t>> order;
  json values = json::array();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const bool good = !runs[i].contains("error") && runs[i].contains(key);
    const double v = good ? runs[i][key].get<double>() : -1;
    order.emplace_back(v, i);
    values.push_back(good ? json(v) : json("failed"));
  }
  if (order.empty()) {
    return {{"error", "no runs"}};
  }
  std::sort(order.begin(), order.end());
  json out = runs[order[(order.size() - 1) / 2].second];
  out["runs"] = values;
  return out;
}

/// How many times a timed scenario's run is tried before its failure is reported.
constexpr int timed_attempts = 3;

/// Runs `run` until it returns a result without "error", at most `attempts` times. A timed run
/// can fail for reasons that are the machine's, not the controller's (its seeding writes, a
/// controller start or the taint PATCH too slow on a loaded machine): such a run says nothing
/// about the timer, so it is run again rather than left as the scenario's only figure. The
/// errors of the runs tried before are kept under "retried"; a run that fails every time is
/// reported as failed.
json with_retries(int attempts, const std::function<json()>& run) {
  json out;
  json retried = json::array();
  for (int i = 0; i < attempts; ++i) {
    out = run();
    if (!out.contains("error")) {
      break;
    }
    retried.push_back(out["error"]);
    std::printf("  the run failed (%s); %s\n", out["error"].dump().c_str(),
                i + 1 < attempts ? "running it again" : "giving up");
    std::fflush(stdout);
  }
  if (!retried.empty()) {
    out["retried"] = retried;
  }
  return out;
}

/// The status patch that sets a node's Ready condition to `status` ("True", "Unknown").
k8sclient::request condition_request(const std::string& node, const char* status,
                                     const char* reason) {
  const std::string stamp = base::format_rfc3339(std::chrono::system_clock::now());
  return {http::verb::patch, "/api/v1/nodes/" + node + "/status",
          std::string(R"({"status":{"conditions":[{"type":"Ready","status":")") + status +
              R"(","reason":")" + reason +
              R"(","message":"eviction_compare","lastHeartbeatTime":")" + stamp +
              R"(","lastTransitionTime":")" + stamp + R"("}]}})",
          "application/merge-patch+json"};
}

/// The status patch that makes a node Ready, as a kubelet reports it.
k8sclient::request ready_request(const std::string& node) {
  return condition_request(node, "True", "KubeletReady");
}

/// One container of a Deployment's pod as an operator writes it (image, ports, env,
/// resources, mounts, probes): the bytes every watch event and LIST carries.
std::string scale_container(const char* name, const std::string& app, int port) {
  const std::string p = std::to_string(port);
  const auto probe = [&](const char* path) {
    return std::string(R"({"httpGet":{"path":")") + path + R"(","port":)" + p +
           R"(,"scheme":"HTTP"},"initialDelaySeconds":10,"periodSeconds":10,)"
           R"("timeoutSeconds":1,"successThreshold":1,"failureThreshold":3})";
  };
  return std::string(R"({"name":")") + name + R"(","image":"registry.example.com/shop/)" + app +
         "-" + name +
         R"(:v1.42.3","imagePullPolicy":"IfNotPresent",)"
         R"("ports":[{"name":"p)" +
         p + R"(","containerPort":)" + p +
         R"(,"protocol":"TCP"}],)"
         R"("env":[{"name":"APP_NAME","value":")" +
         app +
         R"("},{"name":"LOG_LEVEL","value":"info"},{"name":"REGION","value":"eu-west-1"},)"
         R"({"name":"CACHE_URL","value":"redis://cache.shop.svc.cluster.local:6379/0"},)"
         R"({"name":"POD_NAME","valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"metadata.name"}}},)"
         R"({"name":"POD_IP","valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"status.podIP"}}}],)"
         R"("resources":{"requests":{"cpu":"100m","memory":"128Mi"},)"
         R"("limits":{"cpu":"500m","memory":"256Mi"}},)"
         R"("volumeMounts":[{"name":"config","mountPath":"/etc/)" +
         app + R"(","readOnly":true},{"name":"data","mountPath":"/var/lib/)" + app +
         R"("}],"livenessProbe":)" + probe("/healthz") + R"(,"readinessProbe":)" + probe("/ready") +
         R"(,"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"})";
}

/// Pod i of the scale scenario as a Deployment's ReplicaSet creates it (one of 50
/// Deployments), bound to `node`, with the two default NoExecute tolerations at
/// `toleration_seconds` (300 as DefaultTolerationSeconds writes them; shorter for the pods of
/// the outage, so the run does not wait 5 minutes).
std::string scale_pod_body(const std::string& name, long i, const std::string& node,
                           int toleration_seconds) {
  const long d = i % 50;
  const std::string app = "app-" + std::to_string(d);
  const std::string hash = "7c9" + std::to_string(1'000'000 + d);
  const std::string tol = std::to_string(toleration_seconds);
  char uid[40];
  std::snprintf(uid, sizeof uid, "3f6a1c2e-0000-4000-8000-%012ld", d);
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
         R"(","labels":{"app":")" + app + R"(","pod-template-hash":")" + hash +
         R"(","app.kubernetes.io/part-of":"shop","tier":"backend","track":"stable",")" +
         bench_label +
         R"(":"scale"},"annotations":{"prometheus.io/scrape":"true",)"
         R"("prometheus.io/port":"9090","kubectl.kubernetes.io/restartedAt":"2026-11-01T10:00:00Z"},)"
         R"("ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":")" +
         app + "-" + hash + R"(","uid":")" + uid +
         R"(","controller":true,"blockOwnerDeletion":true}]},"spec":{"nodeName":")" + node +
         R"(","serviceAccountName":")" + app + R"(","containers":[)" +
         scale_container("main", app, 8080) + "," + scale_container("sidecar", app, 15000) + "," +
         scale_container("metrics", app, 9090) +
         R"(],"volumes":[{"name":"config","configMap":{"name":")" + app +
         R"(-config","defaultMode":420}},{"name":"data","emptyDir":{}}],)"
         R"("restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst",)"
         R"("tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists",)"
         R"("effect":"NoExecute","tolerationSeconds":)" +
         tol +
         R"(},{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute",)"
         R"("tolerationSeconds":)" +
         tol + "}]}}";
}

/// prefix + "0" ... prefix + (count - 1).
std::vector<std::string> names(const std::string& prefix, long count, long first = 0) {
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(std::max(count - first, 0L)));
  for (long i = first; i < count; ++i) {
    out.push_back(prefix + std::to_string(i));
  }
  return out;
}

json summary(const std::vector<double>& seconds);

// The latency blocks of one contender as one result: their samples pooled (the first error,
// if any block failed).
json pooled_latency(const std::vector<json>& blocks) {
  std::vector<double> latencies;
  std::vector<double> writes;
  for (const auto& b : blocks) {
    if (b.contains("error")) {
      return b;
    }
    for (const auto& x : b["samples_ms"]) {
      latencies.push_back(x.get<double>() / 1e3);
    }
    for (const auto& x : b["write_samples_ms"]) {
      writes.push_back(x.get<double>() / 1e3);
    }
  }
  json out = summary(latencies);
  out["taint_write"] = summary(writes);
  out["blocks"] = blocks.size();
  out["samples_ms"] = json::array();
  for (const double l : latencies) {
    out["samples_ms"].push_back(l * 1e3);
  }
  return out;
}

json summary(const std::vector<double>& seconds) {
  return {
      {"count", seconds.size()},
      {"p50_ms", tb::percentile(seconds, 50) * 1e3},
      {"p90_ms", tb::percentile(seconds, 90) * 1e3},
      {"p99_ms", tb::percentile(seconds, 99) * 1e3},
      {"min_ms", seconds.empty() ? 0.0 : *std::min_element(seconds.begin(), seconds.end()) * 1e3},
      {"max_ms", seconds.empty() ? 0.0 : *std::max_element(seconds.begin(), seconds.end()) * 1e3}};
}

class runner {
public:
  explicit runner(options o) : o_(std::move(o)) {}

  int run();

private:
  // --- plumbing -------------------------------------------------------------------------
  bool connect();
  base::result<k8sclient::response> call(http::verb verb, std::string target, std::string body = {},
                                         std::string content_type = "application/json",
                                         std::chrono::milliseconds limit = 30s) {
    return tb::call(
        io_, *api_,
        k8sclient::request(verb, std::move(target), std::move(body), std::move(content_type)),
        limit);
  }
  std::string pods_path() const { return "/api/v1/namespaces/" + o_.ns + "/pods"; }
  /// `labels(i)`, if given, adds labels to node i (a JSON fragment starting with a comma).
  bool create_nodes(const std::vector<std::string>& names,
                    const std::function<std::string(std::size_t)>& labels = nullptr);
  bool create_pods(const std::vector<std::string>& names,
                   const std::function<std::string(std::size_t)>& node_of,
                   const std::string& extra_toleration);
  /// Creates pod i with the body `body_of(i)` and waits until the watch has seen them all.
  bool create_pod_bodies(const std::vector<std::string>& names,
                         const std::function<std::string(std::size_t)>& body_of);
  bool wait_seen(const std::vector<std::string>& names, std::chrono::seconds limit);
  bool wait_terminating(const std::vector<std::string>& names, steady::time_point deadline,
                        tb::child_process* controller);
  bool taint_nodes(const std::vector<std::string>& nodes, const std::string& key, long concurrency);
  bool cleanup();
  /// Events in the bench namespace (a consistent count: one item plus remainingItemCount).
  std::optional<long> count_events();
  /// Polls count_events() every 100 ms until it reaches `target` or stops growing for 3 s;
  /// the time it was first seen at `target` (steady clock), and the last count.
  std::pair<std::optional<steady::time_point>, long> wait_events(long target);
  std::string pod_body(const std::string& name, const std::string& node,
                       const std::string& extra_toleration) const;

  // --- controllers ----------------------------------------------------------------------
  std::vector<std::string> command(const variant& v, double qps, int burst) const;
  /// Starts `v` and waits until it has evicted a canary pod; the seconds that took.
  std::optional<double> start(const variant& v, double qps, int burst, tb::child_process& child,
                              std::string& error);
  std::string log_tail(const std::string& path) const;
  std::string log_path(const variant& v) const { return o_.out_dir + "/" + v.id + ".log"; }
  std::string watch_log_path() const { return o_.out_dir + "/bench-watch.log"; }
  /// Why pods the bench deleted are still in its informer: how many, its watch's counters,
  /// and what the API server says of the first of them.
  std::string still_seen(const std::vector<std::string>& names);

  // --- scenarios ------------------------------------------------------------------------
  json latency(const variant& v, int runs);
  json mass(const variant& v, double qps, int burst, int pods_per_node);
  json timer(const variant& v);
  json timed(const variant& v, const std::string& what, int node_count, int pods_per_node,
             int spacing_ms);
  json memory(const std::vector<variant>& vs);
  json floor();
  json floor_run(long concurrency, std::size_t per_pod);
  json scale(const std::vector<variant>& vs);
  /// Starts `v`, measures its sync (time to acting, CPU, RSS after the settle time), stops it.
  json scale_sync(const variant& v, double qps, int burst, long pods);
  /// --restart-apiserver: restarts the control plane, then waits until the API server serves
  /// pods from its watch cache, the bench's own watches are open again and the server is idle.
  json restart_server(const std::string& node);
  /// Pod updates at --scale-churn-rate on pods off the outage nodes; `child`'s CPU per update.
  json scale_churn(tb::child_process& child, std::size_t node_count, std::size_t outage, long pods);
  /// The zone outage against `child` (stopped at the end), then the cluster put back.
  json scale_outage(tb::child_process& child, const std::vector<std::string>& nodes,
                    std::size_t outage, long pods, double qps);

  // --- scenario 8: API Priority and Fairness ----------------------------------------------
  json apf();
  json apf_run(const variant& v, long accounts);
  /// The API server's APF counter `metric` by "flow schema -> priority level" (its /metrics).
  std::map<std::string, double> apf_counts(const std::string& metric);
  /// kubectl with the admin kubeconfig; false (and a line on stderr) when it fails.
  bool kubectl(const std::string& args) const;

  void report(const json& results) const;
  /// CPU seconds of kube-apiserver + etcd so far (0 without --cluster-dir).
  double server_cpu_seconds() const;

  options o_;
  asio::io_context io_;
  std::optional<k8sclient::rest_config> config_;
  std::optional<k8sclient::client> watch_api_;  // the informer's (streams)
  std::optional<k8sclient::client> api_;        // everything else, unthrottled
  informers::pod_store store_;
  std::optional<informers::pod_informer> informer_;
  informers::node_store node_store_;
  std::optional<informers::node_informer> node_informer_;
  // Nodes by name: the first time the watch saw them carry a NoExecute taint (the moment a
  // controller's own watch learns of it, give or take the delivery jitter).
  std::unordered_map<std::string, steady::time_point> node_tainted_;
  bool informer_done_ = false;

  // Pods of the bench namespace, by name: first seen, first seen terminating, UID.
  std::unordered_map<std::string, steady::time_point> seen_;
  std::unordered_map<std::string, steady::time_point> terminating_;
  std::unordered_map<std::string, std::string> uid_;
  std::vector<std::string> nodes_;  // created by us, to delete at cleanup
  // kube-controller-manager with --node-monitor-period=1h (the scale scenario): its node
  // monitor then neither strips the outage's unreachable taint from a node it sees Ready nor
  // re-taints a fully disrupted zone's nodes at --node-eviction-rate (0.1 nodes/s), which
  // paced its evictions at one node per 10 s in the outage (the taint manager alone is
  // compared; ours has no node monitor).
  bool kcm_monitor_off_ = false;
  // The apf scenario's identities (bench/apf_setup.sh): while set, command() runs each
  // controller with its in-cluster credentials and leader election on.
  struct apf_identities {
    std::string dir;  ///< tec.kubeconfig, kcm.kubeconfig, noise.tokens, flowschema.yaml
    std::string server;
  };
  std::optional<apf_identities> apf_;
  int canary_seq_ = 0;
  int round_ = 0;
};

bool runner::connect() {
  auto config = k8sclient::load_kubeconfig(o_.kubeconfig);
  if (!config) {
    std::fprintf(stderr, "error: %s\n", config.error().message.c_str());
    return false;
  }
  config_ = std::move(config.value());
  k8sclient::client_options wopts;
  wopts.qps = 0;
  watch_api_.emplace(io_.get_executor(), *config_, wopts);
  k8sclient::client_options copts;
  copts.qps = 0;
  copts.max_connections = 160;
  copts.max_retries = 3;
  api_.emplace(io_.get_executor(), *config_, copts);

  auto version = call(http::verb::get, "/version", {}, "application/json", 20s);
  if (!tb::ok(version)) {
    std::fprintf(stderr, "error: API server not reachable: %s\n", tb::describe(version).c_str());
    return false;
  }
  std::printf("API server %s:%s, %s\n", config_->host.c_str(), config_->port.c_str(),
              json::parse(version->body, nullptr, false).value("gitVersion", "?").c_str());
  auto ns =
      call(http::verb::post, "/api/v1/namespaces",
           R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")" + o_.ns + R"("}})");
  if (!tb::ok(ns) && !(ns && ns->status == 409)) {
    std::fprintf(stderr, "error: creating namespace %s: %s\n", o_.ns.c_str(),
                 tb::describe(ns).c_str());
    return false;
  }
  auto canary = call(http::verb::post, "/api/v1/nodes",
                     std::string(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":)") +
                         R"("tec-bench-canary","labels":{")" + bench_label +
                         R"(":"canary"}},"spec":{"taints":[{"key":")" + canary_taint +
                         R"(","effect":"NoExecute"}]}})");
  if (tb::ok(canary) || (canary && canary->status == 409)) {
    canary = tb::call(io_, *api_, ready_request("tec-bench-canary"));
  }
  if (!tb::ok(canary)) {
    std::fprintf(stderr, "error: creating the canary node: %s\n", tb::describe(canary).c_str());
    return false;
  }

  informer_.emplace(
      *watch_api_, store_,
      [this](const informers::pod_record* old_pod, const informers::pod_record* new_pod) {
        const auto now = steady::now();
        const auto* p = new_pod != nullptr ? new_pod : old_pod;
        if (p->pod.namespace_ != o_.ns) {
          return;
        }
        if (new_pod == nullptr) {
          seen_.erase(p->pod.name);
          terminating_.erase(p->pod.name);
          uid_.erase(p->pod.name);
          return;
        }
        seen_.try_emplace(p->pod.name, now);
        uid_[p->pod.name] = p->pod.uid;
        if (p->pod.terminating) {
          terminating_.try_emplace(p->pod.name, now);
        }
      });
  node_informer_.emplace(
      *watch_api_, node_store_,
      [this](const informers::node_record* old_node, const informers::node_record* new_node) {
        if (new_node == nullptr) {
          node_tainted_.erase(old_node->node.name);
          return;
        }
        for (const auto& t : new_node->node.taints) {
          if (t.effect == tec::controller::taint_effect::no_execute) {
            node_tainted_.try_emplace(new_node->node.name, steady::now());
          }
        }
      });
  asio::co_spawn(io_, node_informer_->run(), [](const std::exception_ptr&) {});
  asio::co_spawn(io_, informer_->run(),
                 [this](const std::exception_ptr&) { informer_done_ = true; });
  if (!tb::run_until(
          io_, [this] { return informer_->has_synced() && node_informer_->has_synced(); },
          steady::now() + 120s)) {
    std::fprintf(stderr, "error: the pod watch did not sync within 120 s\n");
    return false;
  }
  // What an earlier run left is removed, unless it was a --scale-keep run's seed: it is kept
  // and the scale scenario's seeding takes what exists (409).
  return o_.scale_keep || cleanup();
}

std::string runner::pod_body(const std::string& name, const std::string& node,
                             const std::string& extra_toleration) const {
  std::string tolerations =
      R"([{"key":"example.com/maintenance","operator":"Exists","effect":"NoExecute",)"
      R"("tolerationSeconds":600},{"key":"example.com/dedicated","operator":"Equal",)"
      R"("value":"bench","effect":"NoSchedule"})";
  if (!extra_toleration.empty()) {
    tolerations += "," + extra_toleration;
  }
  tolerations += "]";
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
         R"(","labels":{"app":"tec-bench"}},"spec":{"nodeName":")" + node +
         R"(","containers":[{"name":"pause","image":"registry.k8s.io/pause:3.9"}],)"
         R"("tolerations":)" +
         tolerations + "}}";
}

bool runner::create_nodes(const std::vector<std::string>& names,
                          const std::function<std::string(std::size_t)>& labels) {
  tb::batch_options b;
  b.concurrency = o_.seed_concurrency;
  b.deadline = steady::now() + 60s + names.size() * 100ms;
  b.what = "nodes";
  const auto t = tb::run_batch(
      io_, *api_, static_cast<long>(names.size()),
      [&](long i) {
        const auto& n = names[static_cast<std::size_t>(i)];
        // Ready, as a kubelet would report it: without a Ready condition kube-controller-
        // manager's node lifecycle controller adds and removes its own not-ready NoSchedule
        // taint, and its taint patches, computed from a cached copy, can wipe the bench's
        // NoExecute taint written meanwhile (seen: 100 pods never evicted).
        std::vector<k8sclient::request> reqs;
        reqs.emplace_back(http::verb::post, "/api/v1/nodes",
                          R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + n +
                              R"(","labels":{")" + bench_label + R"(":"true")" +
                              (labels ? labels(static_cast<std::size_t>(i)) : std::string()) +
                              "}}}");
        reqs.push_back(ready_request(n));
        return reqs;
      },
      b);
  nodes_.insert(nodes_.end(), names.begin(), names.end());
  if (t.failed > 0) {
    std::fprintf(stderr, "error: creating nodes: %s\n", t.first_failure.c_str());
    return false;
  }
  return true;
}

bool runner::create_pods(const std::vector<std::string>& names,
                         const std::function<std::string(std::size_t)>& node_of,
                         const std::string& extra_toleration) {
  return create_pod_bodies(
      names, [&](std::size_t i) { return pod_body(names[i], node_of(i), extra_toleration); });
}

bool runner::create_pod_bodies(const std::vector<std::string>& names,
                               const std::function<std::string(std::size_t)>& body_of) {
  tb::batch_options b;
  b.concurrency = o_.seed_concurrency;
  // A realistic pod (scenario 7) on a busy 2-core machine went in at 41/s; the bound is 10/s.
  b.deadline = steady::now() + 60s + names.size() * 100ms;
  b.what = "pods created";
  const auto t = tb::run_batch(
      io_, *api_, static_cast<long>(names.size()),
      [&](long i) {
        const auto idx = static_cast<std::size_t>(i);
        return std::vector<k8sclient::request>{
            k8sclient::request(http::verb::post, pods_path(), body_of(idx))};
      },
      b);
  if (t.failed > 0) {
    std::fprintf(stderr, "error: creating pods: %s\n", t.first_failure.c_str());
    return false;
  }
  return wait_seen(names, 60s + std::chrono::seconds{names.size() / 1000});
}

bool runner::wait_seen(const std::vector<std::string>& names, std::chrono::seconds limit) {
  std::size_t next = 0;
  const bool done = tb::run_until(
      io_,
      [&] {
        while (next < names.size() && seen_.contains(names[next])) {
          ++next;
        }
        return next == names.size();
      },
      steady::now() + limit);
  if (!done) {
    std::fprintf(stderr, "error: the watch saw %zu of %zu pods within %lld s\n", next, names.size(),
                 static_cast<long long>(limit.count()));
  }
  return done;
}

bool runner::wait_terminating(const std::vector<std::string>& names, steady::time_point deadline,
                              tb::child_process* controller) {
  std::size_t next = 0;
  auto last_check = steady::now();
  bool alive = true;
  const bool done = tb::run_until(
      io_,
      [&] {
        while (next < names.size() && terminating_.contains(names[next])) {
          ++next;
        }
        if (controller != nullptr && steady::now() - last_check > 1s) {
          last_check = steady::now();
          alive = controller->running();
        }
        return next == names.size() || !alive;
      },
      deadline);
  if (!done || !alive) {
    std::fprintf(stderr, "error: %zu of %zu pods terminating when the wait ended (%s)\n", next,
                 names.size(),
                 alive ? "deadline" : ("controller exited: " + controller->exit_text()).c_str());
    return false;
  }
  return true;
}

bool runner::taint_nodes(const std::vector<std::string>& nodes, const std::string& key,
                         long concurrency) {
  tb::batch_options b;
  b.concurrency = concurrency;
  b.deadline = steady::now() + 60s;
  b.tolerated = {};
  b.what = "taints";
  const std::string patch =
      R"({"spec":{"taints":[{"key":")" + key + R"(","value":"bench","effect":"NoExecute"}]}})";
  const auto t = tb::run_batch(
      io_, *api_, static_cast<long>(nodes.size()),
      [&](long i) {
        return std::vector<k8sclient::request>{k8sclient::request(
            http::verb::patch, "/api/v1/nodes/" + nodes[static_cast<std::size_t>(i)], patch,
            "application/merge-patch+json")};
      },
      b);
  if (t.failed > 0) {
    std::fprintf(stderr, "error: tainting nodes: %s\n", t.first_failure.c_str());
    return false;
  }
  return true;
}

bool runner::cleanup() {
  // Pods first (gracePeriodSeconds=0 removes them at once, terminating or not), then nodes.
  std::vector<std::string> pods;
  pods.reserve(seen_.size());
  for (const auto& [name, _] : seen_) {
    pods.push_back(name);
  }
  tb::batch_options b;
  b.concurrency = 64;
  b.deadline = steady::now() + 60s + pods.size() * 10ms;
  b.what = "pods deleted";
  auto t = tb::run_batch(
      io_, *api_, static_cast<long>(pods.size()),
      [&](long i) {
        return std::vector<k8sclient::request>{k8sclient::request(
            http::verb::delete_, pods_path() + "/" + pods[static_cast<std::size_t>(i)],
            R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})")};
      },
      b);
  if (t.failed > 0) {
    std::fprintf(stderr, "error: deleting pods: %s\n", t.first_failure.c_str());
    return false;
  }
  if (!tb::run_until(
          io_, [this] { return seen_.empty(); }, steady::now() + 60s)) {
    std::fprintf(stderr, "error: %zu pods still seen after the cleanup\n", seen_.size());
    return false;
  }
  // The API server deletes a collection one item at a time: 600 s for the scale scenario's
  // tens of thousands of events.
  auto events = call(http::verb::delete_, "/api/v1/namespaces/" + o_.ns + "/events", {},
                     "application/json", 600s);
  if (!tb::ok(events)) {
    std::fprintf(stderr, "error: deleting events: %s\n", tb::describe(events).c_str());
    return false;
  }
  b.what = "nodes deleted";
  b.deadline = steady::now() + 60s + nodes_.size() * 10ms;
  t = tb::run_batch(
      io_, *api_, static_cast<long>(nodes_.size()),
      [&](long i) {
        return std::vector<k8sclient::request>{k8sclient::request(
            http::verb::delete_, "/api/v1/nodes/" + nodes_[static_cast<std::size_t>(i)])};
      },
      b);
  nodes_.clear();
  if (t.failed > 0) {
    std::fprintf(stderr, "error: deleting nodes: %s\n", t.first_failure.c_str());
    return false;
  }
  return true;
}

std::optional<long> runner::count_events() {
  auto n = tb::count_objects(io_, *api_, "/api/v1/namespaces/" + o_.ns + "/events");
  return n ? std::optional<long>(n.value()) : std::nullopt;
}

std::pair<std::optional<steady::time_point>, long> runner::wait_events(long target) {
  long last = -1;
  auto last_change = steady::now();
  const auto deadline = steady::now() + 300s;
  while (steady::now() < deadline) {
    const auto now = steady::now();
    const auto n = count_events();
    if (n && *n >= target) {
      return {now, *n};
    }
    if (n && *n != last) {
      last = *n;
      last_change = now;
    } else if (now - last_change > 3s) {
      break;
    }
    tb::run_for(io_, 100ms);
  }
  return {std::nullopt, last};
}

std::vector<std::string> runner::command(const variant& v, double qps, int burst) const {
  const std::string q = "--kube-api-qps=" + fixed(qps, 0);
  const std::string b = "--kube-api-burst=" + std::to_string(burst);
  if (v.id == "kcm") {
    std::vector<std::string> argv{
        o_.kcm,
        "--kubeconfig=" + (apf_ ? apf_->dir + "/kcm.kubeconfig" : o_.kubeconfig),
        "--controllers=nodelifecycle",
        apf_ ? "--leader-elect=true" : "--leader-elect=false",
        "--node-monitor-grace-period=1h",
        "--node-startup-grace-period=1h",
        "--port=0",
        "--secure-port=0",
        q,
        b};
    if (kcm_monitor_off_) {
      argv.emplace_back("--node-monitor-period=1h");  // the first pass still runs at start
    }
    if (apf_) {
      // Its node lifecycle controller as kube-system/node-controller (a TokenRequest token it
      // asks for itself), its leader election as system:kube-controller-manager.
      argv.emplace_back("--use-service-account-credentials=true");
    }
    return argv;
  }
  std::vector<std::string> argv{
      v.id == "tec-base" ? o_.tec_base : o_.tec,
      "--kubeconfig=" + (apf_ ? apf_->dir + "/tec.kubeconfig" : o_.kubeconfig),
      apf_ ? "--leader-elect=true" : "--leader-elect=false",
      v.id == "tec+cond" ? "--disruption-condition=true" : "--disruption-condition=false",
      "--metrics-bind-address=0",
      "--health-probe-bind-address=0",
      q,
      b};
  if (apf_) {
    argv.emplace_back("--leader-elect-resource-namespace=taint-eviction-controller");
  }
  // A --tec-arg replaces our default of the same flag.
  const auto overridden = [&](const std::string& arg) {
    const auto flag = arg.substr(0, arg.find('='));
    return std::any_of(o_.tec_args.begin(), o_.tec_args.end(), [&](const std::string& extra) {
      return extra.substr(0, extra.find('=')) == flag;
    });
  };
  argv.erase(std::remove_if(argv.begin() + 1, argv.end(), overridden), argv.end());
  argv.insert(argv.end(), o_.tec_args.begin(), o_.tec_args.end());
  return argv;
}

std::string runner::log_tail(const std::string& path) const {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (lines.size() > 8) {
      lines.erase(lines.begin());
    }
  }
  std::string out;
  for (const auto& l : lines) {
    out += "    " + l + "\n";
  }
  return out;
}

std::optional<double> runner::start(const variant& v, double qps, int burst,
                                    tb::child_process& child, std::string& error) {
  const std::string canary = "canary-" + std::to_string(++canary_seq_);
  auto res = call(http::verb::post, pods_path(), pod_body(canary, "tec-bench-canary", {}));
  if (!tb::ok(res)) {
    error = "creating the canary pod: " + tb::describe(res);
    return std::nullopt;
  }
  const auto argv = command(v, qps, burst);
  {
    std::ofstream log(log_path(v), std::ios::app);
    log << "\n=== eviction_compare: starting";
    for (const auto& a : argv) {
      log << ' ' << a;
    }
    log << '\n';
  }
  const auto t0 = steady::now();
  if (!child.start(argv, log_path(v), error)) {
    return std::nullopt;
  }
  const auto limit = 120s + std::chrono::seconds{seen_.size() / 500};
  const std::vector<std::string> names{canary};
  if (!wait_terminating(names, t0 + limit, &child)) {
    error = v.label + " did not evict the canary pod (log " + log_path(v) + "):\n" +
            log_tail(log_path(v));
    child.stop(5s);
    return std::nullopt;
  }
  const double ready = tb::seconds_since(t0);
  // Remove the canary so it does not count anywhere else.
  call(http::verb::delete_, pods_path() + "/" + canary,
       R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})");
  tb::run_until(
      io_, [&] { return !seen_.contains(canary); }, steady::now() + 10s);
  return ready;
}

// --- scenario 1 ---------------------------------------------------------------------------

json runner::latency(const variant& v, int runs) {
  const double qps = o_.latency_lifted ? o_.lifted_qps : o_.default_qps;
  const int burst = o_.latency_lifted ? o_.lifted_burst : o_.default_burst;
  std::printf("[latency] %s: %d runs, QPS %.0f/%d, %d ms idle before each taint\n", v.label.c_str(),
              runs, qps, burst, o_.latency_gap_ms);
  std::fflush(stdout);
  tb::child_process child;
  std::string error;
  if (!start(v, qps, burst, child, error)) {
    return {{"error", error}};
  }
  const int round = ++round_;
  std::vector<double> latencies;
  std::vector<double> writes;
  for (int i = 0; i < runs; ++i) {
    const std::string node = "lat-" + std::to_string(round) + "-" + std::to_string(i);
    const std::string pod = node + "-pod";
    if (!create_nodes({node}) || !create_pods({pod}, [&](std::size_t) { return node; }, {})) {
      return {{"error", "seeding run " + std::to_string(i)}};
    }
    // The controller sees the pod first, then nothing happens for the rest of the gap.
    tb::run_for(io_, std::chrono::milliseconds{o_.latency_gap_ms});
    const auto t0 = steady::now();
    if (!taint_nodes({node}, "tec-bench/latency", 1)) {
      return {{"error", "tainting run " + std::to_string(i)}};
    }
    writes.push_back(tb::seconds_since(t0));
    if (!wait_terminating({pod}, steady::now() + 30s, &child)) {
      return {{"error", "run " + std::to_string(i) + ": pod not evicted within 30 s"}};
    }
    latencies.push_back(std::chrono::duration<double>(terminating_.at(pod) - t0).count());
    if (!cleanup()) {
      return {{"error", "cleanup after run " + std::to_string(i)}};
    }
  }
  child.stop(10s);
  json out = summary(latencies);
  out["taint_write"] = summary(writes);
  out["samples_ms"] = json::array();
  for (const double l : latencies) {
    out["samples_ms"].push_back(l * 1e3);
  }
  out["write_samples_ms"] = json::array();
  for (const double w : writes) {
    out["write_samples_ms"].push_back(w * 1e3);
  }
  std::printf("  p50 %s p99 %s (taint PATCH p50 %s)\n", ms(tb::percentile(latencies, 50)).c_str(),
              ms(tb::percentile(latencies, 99)).c_str(), ms(tb::percentile(writes, 50)).c_str());
  return out;
}

// --- scenarios 2 and 5 ----------------------------------------------------------------------

json runner::mass(const variant& v, double qps, int burst, int pods_per_node) {
  const int round = ++round_;
  const auto nodes = names("mass-" + std::to_string(round) + "-node-", o_.mass_nodes);
  const auto pods = names("mass-" + std::to_string(round) + "-", o_.mass_nodes * pods_per_node);
  std::printf("[mass] %s: %zu nodes x %d pods, QPS %.0f/%d\n", v.label.c_str(), nodes.size(),
              pods_per_node, qps, burst);
  std::fflush(stdout);
  if (!create_nodes(nodes) ||
      !create_pods(pods, [&](std::size_t i) { return nodes[i % nodes.size()]; }, {})) {
    cleanup();
    return {{"error", "seeding"}};
  }
  tb::child_process child;
  std::string error;
  const auto ready = start(v, qps, burst, child, error);
  if (!ready) {
    cleanup();
    return {{"error", error}};
  }
  tb::run_for(io_, 2s);
  const long events_before = count_events().value_or(0);
  const auto before = tb::sample_process(child.pid());
  const double server_before = server_cpu_seconds();
  const auto t0 = steady::now();
  const bool tainted = taint_nodes(nodes, "tec-bench/mass", static_cast<long>(nodes.size()));
  const double taint_seconds = tb::seconds_since(t0);
  // The slowest honest pace is two requests (event, DELETE) per pod at the QPS.
  const auto limit = std::chrono::seconds{
      120 + static_cast<long>(static_cast<double>(pods.size()) * 2 / std::max(qps, 1.0) * 1.5)};
  const bool done = tainted && wait_terminating(pods, t0 + limit, &child);
  const auto after = tb::sample_process(child.pid());
  const double server_cpu = server_cpu_seconds() - server_before;
  const double window = tb::seconds_since(t0);
  // The events trail the deletions (both controllers send them one at a time).
  const auto [events_done, events] =
      done ? wait_events(events_before + static_cast<long>(pods.size()))
           : std::pair<std::optional<steady::time_point>, long>{std::nullopt, 0};
  const auto end = tb::sample_process(child.pid());
  child.stop(10s);
  json out;
  if (!done) {
    out["error"] = "not all pods evicted within " + std::to_string(limit.count()) + " s";
  }
  out["events"] = events - events_before;
  if (events_done) {
    out["events_seconds"] = std::chrono::duration<double>(*events_done - t0).count();
  }
  if (before && end) {
    out["cpu_seconds_with_events"] = end->cpu_seconds - before->cpu_seconds;
  }
  if (!o_.cluster_dir.empty()) {
    out["server_cpu_seconds"] = server_cpu;  // kube-apiserver + etcd, same window as cpu_seconds
    out["server_cpu_share"] = server_cpu / window;
  }
  std::vector<double> at;
  at.reserve(pods.size());
  for (const auto& p : pods) {
    if (const auto it = terminating_.find(p); it != terminating_.end()) {
      at.push_back(std::chrono::duration<double>(it->second - t0).count());
    }
  }
  const double seconds = at.empty() ? 0 : *std::max_element(at.begin(), at.end());
  out["pods"] = pods.size();
  out["evicted"] = at.size();
  out["seconds"] = seconds;
  out["pods_per_second"] = seconds > 0 ? static_cast<double>(at.size()) / seconds : 0;
  out["first_ms"] = at.empty() ? 0 : *std::min_element(at.begin(), at.end()) * 1e3;
  out["p50_ms"] = tb::percentile(at, 50) * 1e3;
  out["taint_writes_seconds"] = taint_seconds;
  out["ready_seconds"] = *ready;
  if (before && after) {
    out["cpu_seconds"] = after->cpu_seconds - before->cpu_seconds;
    out["rss_mib"] = static_cast<double>(after->rss_bytes) / (1 << 20);
  }
  if (events_done) {
    const double all = std::max(seconds, out["events_seconds"].get<double>());
    out["complete_seconds"] = all;
    out["complete_per_second"] = static_cast<double>(pods.size()) / all;
  }
  std::printf(
      "  %zu/%zu pods in %.2f s: %.0f pods/s, CPU %.2f s; %ld events, all written after %.2f s\n",
      at.size(), pods.size(), seconds, out["pods_per_second"].get<double>(),
      out.value("cpu_seconds", 0.0), events - events_before, out.value("events_seconds", -1.0));
  if (!cleanup()) {
    out["error"] = "cleanup failed";
  }
  return out;
}

// --- scenario 3 -----------------------------------------------------------------------------

json runner::timer(const variant& v) {
  return timed(v, "timer", o_.timer_nodes, o_.timer_pods_per_node, o_.timer_spacing_ms);
}

// Scenarios 3 and 3b: `node_count` nodes with `pods_per_node` pods each, all tolerating the
// taint for timer_seconds; the nodes are tainted `spacing_ms` apart. The error of each pod is
// its deletionTimestamp seen minus its node's taint seen minus the toleration.
json runner::timed(const variant& v, const std::string& what, int node_count, int pods_per_node,
                   int spacing_ms) {
  const int round = ++round_;
  const auto nodes = names(what + "-" + std::to_string(round) + "-node-", node_count);
  const auto pods = names(what + "-" + std::to_string(round) + "-", node_count * pods_per_node);
  std::printf("[%s] %s: %zu pods tolerating %d s, %zu taints %d ms apart, QPS %.0f/%d\n",
              what.c_str(), v.label.c_str(), pods.size(), o_.timer_seconds, nodes.size(),
              spacing_ms, o_.lifted_qps, o_.lifted_burst);
  std::fflush(stdout);
  const std::string toleration =
      R"({"key":"tec-bench/timer","operator":"Exists","effect":"NoExecute","tolerationSeconds":)" +
      std::to_string(o_.timer_seconds) + "}";
  if (!create_nodes(nodes) ||
      !create_pods(
          pods, [&](std::size_t i) { return nodes[i % nodes.size()]; }, toleration)) {
    cleanup();
    return {{"error", "seeding"}};
  }
  tb::child_process child;
  std::string error;
  if (!start(v, o_.lifted_qps, o_.lifted_burst, child, error)) {
    cleanup();
    return {{"error", error}};
  }
  tb::run_for(io_, 1s);
  // Each taint PATCH goes out on its own schedule; the due time of a node's pods is the
  // moment its PATCH was sent plus the toleration.
  struct taint_times {
    std::vector<steady::time_point> sent;
    std::vector<steady::time_point> answered;
    std::size_t answers = 0;
    std::size_t failures = 0;
  };
  // Shared with the PATCH completions, which may outlive this function after a timeout.
  auto tt = std::make_shared<taint_times>();
  tt->sent.resize(nodes.size());
  tt->answered.resize(nodes.size());
  const std::string patch =
      R"({"spec":{"taints":[{"key":"tec-bench/timer","value":"bench","effect":"NoExecute"}]}})";
  const auto t0 = steady::now();
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const auto due = t0 + n * std::chrono::milliseconds{spacing_ms};
    tb::run_until(
        io_, [&] { return steady::now() >= due; }, due + 1s);
    tt->sent[n] = steady::now();
    asio::co_spawn(
        io_,
        [](k8sclient::client& c, k8sclient::request req) -> asio::awaitable<bool> {
          co_return tb::ok(co_await c.send(std::move(req)));
        }(*api_, k8sclient::request(http::verb::patch, "/api/v1/nodes/" + nodes[n], patch,
                                    "application/merge-patch+json")),
        [tt, n](const std::exception_ptr& e, bool good) {
          tt->answered[n] = steady::now();
          ++tt->answers;
          tt->failures += (e || !good) ? 1U : 0U;
        });
  }
  const auto deadline = steady::now() + std::chrono::seconds{o_.timer_seconds} + 300s;
  const bool answered_all = tb::run_until(
      io_, [&] { return tt->answers == nodes.size(); }, deadline);
  const std::size_t failures = tt->failures;
  const bool done = answered_all && failures == 0 && wait_terminating(pods, deadline, &child);
  const auto& sent = tt->sent;
  const auto& answered = tt->answered;
  child.stop(10s);
  json out;
  if (!done) {
    out["error"] = failures > 0 ? "a taint PATCH failed" : "not all pods evicted in time";
  }
  std::vector<double> errors;  // from the moment our watch saw the taint
  std::vector<double> errors_from_sent;
  std::vector<double> errors_from_answer;
  const auto toleration_time = std::chrono::seconds{o_.timer_seconds};
  for (std::size_t i = 0; i < pods.size(); ++i) {
    if (const auto it = terminating_.find(pods[i]); it != terminating_.end()) {
      const auto n = i % nodes.size();
      const auto tainted = node_tainted_.find(nodes[n]);
      if (tainted == node_tainted_.end()) {
        continue;
      }
      errors.push_back(
          std::chrono::duration<double>(it->second - (tainted->second + toleration_time)).count());
      errors_from_sent.push_back(
          std::chrono::duration<double>(it->second - (sent[n] + toleration_time)).count());
      errors_from_answer.push_back(
          std::chrono::duration<double>(it->second - (answered[n] + toleration_time)).count());
    }
  }
  out.update(summary(errors));
  out["from_patch_sent"] = summary(errors_from_sent);
  out["from_patch_answer"] = summary(errors_from_answer);
  std::vector<double> patch_latency;
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    patch_latency.push_back(std::chrono::duration<double>(answered[n] - sent[n]).count());
  }
  out["taint_patch_latency"] = summary(patch_latency);
  out["early"] = std::count_if(errors.begin(), errors.end(), [](double e) { return e < 0; });
  std::printf("  error first %s p50 %s p99 %s max %s (%zu pods)\n",
              ms(errors.empty() ? 0 : *std::min_element(errors.begin(), errors.end())).c_str(),
              ms(tb::percentile(errors, 50)).c_str(), ms(tb::percentile(errors, 99)).c_str(),
              ms(errors.empty() ? 0 : *std::max_element(errors.begin(), errors.end())).c_str(),
              errors.size());
  if (!cleanup()) {
    out["error"] = "cleanup failed";
  }
  return out;
}

// --- scenario 4 -----------------------------------------------------------------------------

json runner::memory(const std::vector<variant>& vs) {
  json out = json::object();
  const auto nodes = names("mem-node-", o_.memory_nodes);
  std::printf("[memory] %zu nodes\n", nodes.size());
  if (!create_nodes(nodes)) {
    cleanup();
    return {{"error", "seeding nodes"}};
  }
  std::size_t have = 0;
  for (const long target : o_.memory_pods) {
    const auto pods = names("mem-", target, static_cast<long>(have));
    std::printf("[memory] seeding to %ld pods\n", target);
    std::fflush(stdout);
    const std::size_t base = have;
    if (!create_pods(pods, [&](std::size_t i) { return nodes[(base + i) % nodes.size()]; }, {})) {
      out["error"] = "seeding pods";
      break;
    }
    have = static_cast<std::size_t>(target);
    for (const auto& v : vs) {
      tb::child_process child;
      std::string error;
      const auto ready = start(v, o_.default_qps, o_.default_burst, child, error);
      if (!ready) {
        out[std::to_string(target)][v.id] = {{"error", error}};
        continue;
      }
      // Settle: let start-up garbage be collected, keep the watches running.
      tb::run_for(io_, std::chrono::seconds{o_.memory_settle_seconds});
      const auto s = tb::sample_process(child.pid());
      child.stop(10s);
      if (!s) {
        out[std::to_string(target)][v.id] = {{"error", "no /proc sample"}};
        continue;
      }
      out[std::to_string(target)][v.id] = {
          {"rss_mib", static_cast<double>(s->rss_bytes) / (1 << 20)},
          {"peak_rss_mib", static_cast<double>(s->rss_peak_bytes) / (1 << 20)},
          {"ready_seconds", *ready},
          {"cpu_seconds_to_settle", s->cpu_seconds}};
      std::printf("  %s with %ld pods: RSS %.1f MiB (peak %.1f MiB), synced and acting in %.2f s\n",
                  v.label.c_str(), target, static_cast<double>(s->rss_bytes) / (1 << 20),
                  static_cast<double>(s->rss_peak_bytes) / (1 << 20), *ready);
      std::fflush(stdout);
    }
  }
  if (!cleanup()) {
    out["error"] = "cleanup failed";
  }
  return out;
}

// --- scenario 7 -----------------------------------------------------------------------------

std::string scale_pod_name(long i) {
  return "scale-" + std::to_string(i);
}

json runner::scale(const std::vector<variant>& vs) {
  json out = json::object();
  const double qps = o_.scale_lifted ? o_.lifted_qps : o_.default_qps;
  const int burst = o_.scale_lifted ? o_.lifted_burst : o_.default_burst;
  const auto nodes = names("scale-node-", o_.scale_nodes);
  const auto outage = std::min(static_cast<std::size_t>(o_.scale_outage_nodes), nodes.size());
  out["qps"] = qps;
  out["burst"] = burst;
  out["kcm_node_monitor"] = o_.scale_kcm_monitor;
  kcm_monitor_off_ = !o_.scale_kcm_monitor;
  std::printf("[scale] %zu nodes, pods %s, outage of %zu nodes, QPS %.0f/%d\n", nodes.size(),
              json(o_.scale_pods).dump().c_str(), outage, qps, burst);
  std::fflush(stdout);
  // The outage's nodes are one zone; the others spread over four more.
  const auto zone_of = [&](std::size_t n) {
    return n < outage ? std::string("eu-west-1a")
                      : std::string("eu-west-1") + static_cast<char>('b' + n % 4);
  };
  auto t0 = steady::now();
  if (!create_nodes(nodes, [&](std::size_t n) {
        return R"(,"topology.kubernetes.io/region":"eu-west-1","topology.kubernetes.io/zone":")" +
               zone_of(n) + R"(","kubernetes.io/hostname":")" + nodes[n] +
               R"(","kubernetes.io/os":"linux","kubernetes.io/arch":"amd64",)"
               R"("node.kubernetes.io/instance-type":"m5.2xlarge","node-role.kubernetes.io/worker":"")";
      })) {
    cleanup();
    return {{"error", "seeding nodes"}};
  }
  out["durations"]["nodes_seconds"] = tb::seconds_since(t0);
  const auto body_of = [&](long i) {
    const auto n = static_cast<std::size_t>(i) % nodes.size();
    return scale_pod_body(scale_pod_name(i), i, nodes[n],
                          n < outage ? o_.scale_toleration_seconds : 300);
  };
  long have = 0;
  for (const long target : o_.scale_pods) {
    const auto key = std::to_string(target);
    std::printf("[scale] seeding to %ld pods\n", target);
    std::fflush(stdout);
    t0 = steady::now();
    const long base = have;
    if (!create_pod_bodies(names("scale-", target, have),
                           [&](std::size_t k) { return body_of(base + static_cast<long>(k)); })) {
      out["error"] = "seeding pods";
      break;
    }
    out["durations"]["seed_" + key + "_seconds"] = tb::seconds_since(t0);
    have = target;
    if (!o_.restart_apiserver.empty()) {
      out[key]["restart"] = restart_server(nodes.front());
      if (out[key]["restart"].contains("error")) {
        out["error"] = out[key]["restart"]["error"];
        break;
      }
    }
    // Every controller's sync first, interleaved and repeated (--scale-sync-repeat), on the
    // cluster as seeded: the API server's state drifts (its heap, after a controller's LIST of
    // 1.2 GB or an outage of 30,000 pods), and a controller measured after another's outage
    // met a slower server (17.6 s against 8-12 s for the same LIST).
    for (int rep = 0; rep < o_.scale_sync_repeat; ++rep) {
      for (const auto& v : vs) {
        auto r = scale_sync(v, qps, burst, target);
        out[key][v.id]["runs"].push_back(std::move(r));
      }
    }
    for (const auto& v : vs) {
      auto& per = out[key][v.id];
      std::vector<double> ready;
      std::vector<double> cpu;
      std::vector<double> rss;
      double peak = 0;
      for (const auto& r : per["runs"]) {
        if (r.contains("error")) {
          per["error"] = r["error"];
          continue;
        }
        ready.push_back(r["ready_seconds"].get<double>());
        cpu.push_back(r["cpu_sync_seconds"].get<double>());
        rss.push_back(r["rss_mib"].get<double>());
        peak = std::max(peak, r["peak_rss_mib"].get<double>());
      }
      if (!ready.empty()) {  // medians of the runs; the peak is the highest
        per["ready_seconds"] = tb::percentile(ready, 50);
        per["cpu_sync_seconds"] = tb::percentile(cpu, 50);
        per["rss_mib"] = tb::percentile(rss, 50);
        per["peak_rss_mib"] = peak;
      }
    }
    if (target != o_.scale_pods.back()) {
      continue;
    }
    // Then, at the largest size, each controller in turn: the churn and the zone outage.
    for (const auto& v : vs) {
      t0 = steady::now();
      tb::child_process child;
      std::string error;
      if (!start(v, qps, burst, child, error)) {
        out[key][v.id]["churn"] = {{"error", error}};
        continue;
      }
      out[key][v.id]["churn"] = scale_churn(child, nodes.size(), outage, target);
      out[key][v.id]["outage"] = scale_outage(child, nodes, outage, target, qps);
      child.stop(10s);
      out[key][v.id]["churn_outage_seconds"] = tb::seconds_since(t0);
    }
  }
  if (o_.scale_keep) {
    std::printf("[scale] --scale-keep: the nodes and pods stay in the cluster\n");
    kcm_monitor_off_ = false;
    return out;
  }
  t0 = steady::now();
  if (!cleanup()) {
    out["error"] =
        out.value("error", std::string()) + (out.contains("error") ? "; " : "") + "cleanup failed";
  }
  out["durations"]["cleanup_seconds"] = tb::seconds_since(t0);
  kcm_monitor_off_ = false;
  return out;
}

json runner::scale_sync(const variant& v, double qps, int burst, long pods) {
  const auto t0 = steady::now();
  tb::child_process child;
  std::string error;
  const auto ready = start(v, qps, burst, child, error);
  if (!ready) {
    return {{"error", error}};
  }
  const auto synced = tb::sample_process(child.pid());
  tb::run_for(io_, std::chrono::seconds{o_.memory_settle_seconds});
  const auto settled = tb::sample_process(child.pid());
  json r = {{"ready_seconds", *ready}};
  if (synced && settled) {
    r["cpu_sync_seconds"] = synced->cpu_seconds;
    r["rss_mib"] = static_cast<double>(settled->rss_bytes) / (1 << 20);
    r["peak_rss_mib"] = static_cast<double>(settled->rss_peak_bytes) / (1 << 20);
  } else {
    r["error"] = "no /proc sample";
  }
  std::printf(
      "  %s with %ld pods: synced and acting in %.2f s (CPU %.2f s), RSS %.1f MiB (peak "
      "%.1f MiB)\n",
      v.label.c_str(), pods, *ready, r.value("cpu_sync_seconds", 0.0), r.value("rss_mib", 0.0),
      r.value("peak_rss_mib", 0.0));
  std::fflush(stdout);
  child.stop(10s);
  r["step_seconds"] = tb::seconds_since(t0);
  return r;
}

json runner::restart_server(const std::string& node) {
  // kube-apiserver's live heap grows as it runs: at 150,000 pods it held 7.4 GiB right after a
  // start and 9.8 GiB after a sync, a churn and part of an outage, against the 10 GiB
  // GOMEMLIMIT compare.sh gives it on this machine; its LIST of all pods then took 15-17 s
  // instead of 7-10 s (gctrace: a GC cycle of 5-7 s every few seconds). Restarted after
  // seeding, every size's syncs meet a server that holds the cluster and nothing of the
  // phases before, whichever controller goes first.
  const auto t0 = steady::now();
  const auto pod_watches0 = informer_->stats().watches;
  const auto node_watches0 = node_informer_->stats().watches;
  std::printf("[scale] restarting the API server\n");
  std::fflush(stdout);
  if (const int rc = std::system(o_.restart_apiserver.c_str()); rc != 0) {
    return {{"error", "--restart-apiserver command exited " + std::to_string(rc)}};
  }
  json r;
  // A LIST from the watch cache (resourceVersion=0) waits until the cache holds every pod; one
  // node's pods, by the cache's spec.nodeName index, keep it small.
  const auto cached = call(
      http::verb::get, "/api/v1/pods?fieldSelector=spec.nodeName%3D" + node + "&resourceVersion=0",
      {}, "application/json", 300s);
  if (!cached || cached->status != 200) {
    return {{"error", "the restarted API server does not list pods: " +
                          (cached ? std::to_string(cached->status) : cached.error().message)}};
  }
  r["cache_ready_seconds"] = tb::seconds_since(t0);
  // The bench's watches, which see the controllers' evictions, open again (after a relist).
  if (!tb::run_until(
          io_,
          [&] {
            return informer_->stats().watches > pod_watches0 &&
                   node_informer_->stats().watches > node_watches0;
          },
          steady::now() + 600s)) {
    return {{"error", "the bench's watches did not reopen within 600 s of the restart"}};
  }
  r["watching_seconds"] = tb::seconds_since(t0);
  // Idle: kube-apiserver and etcd below a quarter of a core over 3 s (up to 300 s).
  bool idle = false;
  const auto deadline = steady::now() + 300s;
  while (!idle && steady::now() < deadline) {
    const double c0 = server_cpu_seconds();
    tb::run_for(io_, 3s);
    idle = (server_cpu_seconds() - c0) / 3 < 0.25;
  }
  r["idle"] = idle;
  r["seconds"] = tb::seconds_since(t0);
  std::printf(
      "[scale] API server restarted: cache ready in %.1f s, watched in %.1f s, %s in %.1f s\n",
      r["cache_ready_seconds"].get<double>(), r["watching_seconds"].get<double>(),
      idle ? "idle" : "still busy", r["seconds"].get<double>());
  std::fflush(stdout);
  return r;
}

json runner::scale_churn(tb::child_process& child, std::size_t node_count, std::size_t outage,
                         long pods) {
  if (outage >= node_count) {
    return {{"error", "churn: every node is in the outage, no pod to update"}};
  }
  // The controller's idle CPU (kube-controller-manager's node monitor walks every node every
  // 5 s) over a window of its own, subtracted from the churn's; after the settle time, so
  // that the work left from the sync (kube-controller-manager's garbage collection of the
  // 1.2 GB LIST at 150,000 pods: 0.19 cores) is not counted as idle.
  tb::run_for(io_, std::chrono::seconds{o_.memory_settle_seconds});
  const auto idle_window = std::chrono::seconds{std::min(o_.scale_churn_seconds, 10)};
  const auto i0 = tb::sample_process(child.pid());
  tb::run_for(io_, idle_window);
  const auto i1 = tb::sample_process(child.pid());
  const long total = static_cast<long>(o_.scale_churn_rate) * o_.scale_churn_seconds;
  const int round = ++round_;
  std::printf("  churn: %ld pod updates at %d/s\n", total, o_.scale_churn_rate);
  std::fflush(stdout);
  struct churn_state {
    long answered = 0;
    long failed = 0;
  };
  auto st = std::make_shared<churn_state>();
  const auto c0 = tb::sample_process(child.pid());
  const auto t0 = steady::now();
  long sent = 0;
  long next = 0;
  while (sent < total && child.running()) {
    const long due =
        std::min(total, static_cast<long>(tb::seconds_since(t0) * o_.scale_churn_rate) + 1);
    for (; sent < due; ++sent) {
      // Round-robin over the pods off the outage's nodes.
      while (static_cast<std::size_t>(next % pods) % node_count < outage) {
        ++next;
      }
      const std::string pod = scale_pod_name(next++ % pods);
      // A value no earlier churn wrote: a merge patch that changes nothing is no update (no
      // new resourceVersion, no watch event), and a second controller's churn replayed the
      // first one's values.
      const std::string value = std::to_string(round) + "-" + std::to_string(sent);
      asio::co_spawn(
          io_,
          [](k8sclient::client& c, k8sclient::request req) -> asio::awaitable<bool> {
            co_return tb::ok(co_await c.send(std::move(req)));
          }(*api_, k8sclient::request(
                       http::verb::patch, pods_path() + "/" + pod,
                       R"({"metadata":{"annotations":{"tec-bench/churn":")" + value + R"("}}})",
                       "application/merge-patch+json")),
          [st](const std::exception_ptr& e, bool good) {
            ++st->answered;
            st->failed += (e || !good) ? 1 : 0;
          });
    }
    tb::run_for(io_, 5ms);
  }
  const bool answered = tb::run_until(
      io_, [&] { return st->answered == sent; }, steady::now() + 60s);
  const double send_seconds = tb::seconds_since(t0);
  tb::run_for(io_, 2s);  // the controller digests the last watch events
  const auto c1 = tb::sample_process(child.pid());
  const double window = tb::seconds_since(t0);
  json out = {{"updates", sent}, {"failed", st->failed}, {"send_seconds", send_seconds}};
  if (!answered || st->failed > 0 || sent < total) {
    out["error"] = "churn: " + std::to_string(st->failed) + " updates failed, " +
                   std::to_string(sent - st->answered) + " unanswered, " +
                   std::to_string(total - sent) + " not sent";
  }
  if (i0 && i1 && c0 && c1 && sent > 0) {
    // Nanosecond run times where every sample has them (a controller's CPU per update is a
    // few microseconds: 12,000 updates are a few 10 ms ticks), else the ticks.
    const bool fine = i0->run_seconds >= 0 && i1->run_seconds >= 0 && c0->run_seconds >= 0 &&
                      c1->run_seconds >= 0;
    const auto cpu_of = [fine](const tb::process_sample& p) {
      return fine ? p.run_seconds : p.cpu_seconds;
    };
    out["cpu_clock"] = fine ? "schedstat" : "ticks";

    const double idle_rate =
        (cpu_of(*i1) - cpu_of(*i0)) / std::chrono::duration<double>(idle_window).count();
    const double cpu = cpu_of(*c1) - cpu_of(*c0);
    out["idle_cpu_share"] = idle_rate;
    out["cpu_seconds"] = cpu;
    out["cpu_us_per_update_raw"] = cpu / static_cast<double>(sent) * 1e6;
    out["cpu_us_per_update"] =
        std::max(0.0, cpu - idle_rate * window) / static_cast<double>(sent) * 1e6;
    std::printf(
        "  churn: %ld updates in %.1f s, CPU %.3f s (idle %.4f cores): %.1f us per update "
        "(%.1f us before subtracting idle)\n",
        sent, send_seconds, cpu, idle_rate, out["cpu_us_per_update"].get<double>(),
        out["cpu_us_per_update_raw"].get<double>());
  } else if (!out.contains("error")) {
    out["error"] = "no /proc sample";
  }
  std::fflush(stdout);
  return out;
}

json runner::scale_outage(tb::child_process& child, const std::vector<std::string>& nodes,
                          std::size_t outage, long pods, double qps) {
  std::vector<long> victims;  // pod indices on the outage's nodes
  std::vector<std::string> names_of;
  for (long i = 0; i < pods; ++i) {
    if (static_cast<std::size_t>(i) % nodes.size() < outage) {
      victims.push_back(i);
      names_of.push_back(scale_pod_name(i));
    }
  }
  std::printf("  outage: %zu nodes unreachable, %zu pods tolerating %d s\n", outage, victims.size(),
              o_.scale_toleration_seconds);
  std::fflush(stdout);
  // A zone outage as kube-controller-manager's node lifecycle controller records it: the
  // unreachable NoExecute taint goes on and Ready turns Unknown. Taints first, all of them: on
  // Ready=Unknown kube-controller-manager adds unreachable:NoSchedule with a patch that
  // replaces the whole taint list as it read it, and a read from before the NoExecute taint
  // wiped it (seen: 48 of 80 evictions cancelled). A node's due time counts from the answer to
  // its taint PATCH.
  auto answered = std::make_shared<std::vector<steady::time_point>>(outage);
  const std::string taint =
      R"({"spec":{"taints":[{"key":"node.kubernetes.io/unreachable","effect":"NoExecute"}]}})";
  tb::batch_options b;
  b.concurrency = std::min<long>(static_cast<long>(outage), 100);
  b.deadline = steady::now() + 120s;
  b.tolerated = {};
  b.what = "outage taints";
  b.on_item_done = [answered](long i) { (*answered)[static_cast<std::size_t>(i)] = steady::now(); };
  const auto t0 = steady::now();
  const auto t = tb::run_batch(
      io_, *api_, static_cast<long>(outage),
      [&](long i) {
        return std::vector<k8sclient::request>{k8sclient::request(
            http::verb::patch, "/api/v1/nodes/" + nodes[static_cast<std::size_t>(i)], taint,
            "application/merge-patch+json")};
      },
      b);
  b.on_item_done = nullptr;
  b.what = "outage conditions";
  const auto c =
      t.failed > 0 ? t
                   : tb::run_batch(
                         io_, *api_, static_cast<long>(outage),
                         [&](long i) {
                           return std::vector<k8sclient::request>{condition_request(
                               nodes[static_cast<std::size_t>(i)], "Unknown", "NodeStatusUnknown")};
                         },
                         b);
  json out;
  out["nodes"] = outage;
  out["pods"] = victims.size();
  out["taint_writes_seconds"] = tb::seconds_since(t0);
  // The slowest honest pace: two requests (event, DELETE) per pod at the QPS, and at least 50
  // pods/s (with the limits lifted, kube-controller-manager evicted 30,000 pods at 116/s: the
  // QPS term alone gave it 150 s).
  const auto limit =
      std::chrono::seconds{o_.scale_toleration_seconds + 120 +
                           static_cast<long>(static_cast<double>(victims.size()) *
                                             std::max(2 / std::max(qps, 1.0) * 1.5, 1.0 / 50))};
  const bool done = c.failed == 0 && wait_terminating(names_of, t0 + limit, &child);
  if (c.failed > 0) {
    out["error"] = "tainting: " + c.first_failure;
  } else if (!done) {
    out["error"] = "not all pods evicted within " + std::to_string(limit.count()) + " s";
  }
  const auto tol = std::chrono::seconds{o_.scale_toleration_seconds};
  std::vector<double> errors;
  std::vector<steady::time_point> at;
  for (std::size_t k = 0; k < victims.size(); ++k) {
    if (const auto it = terminating_.find(names_of[k]); it != terminating_.end()) {
      const auto n = static_cast<std::size_t>(victims[k]) % nodes.size();
      errors.push_back(std::chrono::duration<double>(it->second - ((*answered)[n] + tol)).count());
      at.push_back(it->second);
    }
  }
  out.update(summary(errors));
  out["evicted"] = errors.size();
  out["early"] = std::count_if(errors.begin(), errors.end(), [](double e) { return e < 0; });
  if (at.size() > 1) {
    const auto [first, last] = std::minmax_element(at.begin(), at.end());
    const double span = std::chrono::duration<double>(*last - *first).count();
    out["issue_seconds"] = span;
    out["pods_per_second"] = span > 0 ? static_cast<double>(at.size() - 1) / span : 0;
  }
  std::printf("  outage: %zu/%zu evicted, error p50 %s p99 %s max %s, %.0f pods/s\n", errors.size(),
              victims.size(), ms(tb::percentile(errors, 50)).c_str(),
              ms(tb::percentile(errors, 99)).c_str(),
              ms(errors.empty() ? 0 : *std::max_element(errors.begin(), errors.end())).c_str(),
              out.value("pods_per_second", 0.0));
  std::fflush(stdout);
  child.stop(10s);

  // Put the cluster back for the next controller: nodes Ready and untainted, the evicted pods
  // force-deleted (no kubelet) and created again as they were.
  const auto r0 = steady::now();
  b = {};
  b.concurrency = 64;
  b.deadline = steady::now() + 120s;
  b.what = "outage restored";
  auto r = tb::run_batch(
      io_, *api_, static_cast<long>(outage),
      [&](long i) {
        const auto& n = nodes[static_cast<std::size_t>(i)];
        std::vector<k8sclient::request> reqs;
        reqs.push_back(ready_request(n));
        reqs.emplace_back(http::verb::patch, "/api/v1/nodes/" + n, R"({"spec":{"taints":null}})",
                          "application/merge-patch+json");
        return reqs;
      },
      b);
  b.deadline = steady::now() + 60s + victims.size() * 10ms;
  b.what = "outage pods deleted";
  if (r.failed == 0) {
    r = tb::run_batch(
        io_, *api_, static_cast<long>(victims.size()),
        [&](long k) {
          return std::vector<k8sclient::request>{k8sclient::request(
              http::verb::delete_, pods_path() + "/" + names_of[static_cast<std::size_t>(k)],
              R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})")};
        },
        b);
  }
  const bool gone =
      r.failed == 0 && tb::run_until(
                           io_,
                           [&] {
                             return std::none_of(names_of.begin(), names_of.end(),
                                                 [&](const auto& p) { return seen_.contains(p); });
                           },
                           steady::now() + 120s + victims.size() * 4ms);
  if (r.failed == 0 && !gone) {
    r.first_failure = still_seen(names_of);
  }
  const bool restored =
      gone && create_pod_bodies(names_of, [&](std::size_t k) {
        const long i = victims[k];
        return scale_pod_body(names_of[k], i, nodes[static_cast<std::size_t>(i) % nodes.size()],
                              o_.scale_toleration_seconds);
      });
  if (!restored) {
    out["error"] = "restoring the cluster after the outage" +
                   (r.first_failure.empty() ? std::string() : ": " + r.first_failure);
  }
  out["restore_seconds"] = tb::seconds_since(r0);
  return out;
}

std::string runner::still_seen(const std::vector<std::string>& names) {
  std::vector<std::string> left;
  for (const auto& n : names) {
    if (seen_.contains(n)) {
      left.push_back(n);
    }
  }
  if (left.empty()) {
    return {};
  }
  const auto s = informer_->stats();
  std::string why = std::to_string(left.size()) + " of " + std::to_string(names.size()) +
                    " deleted pods still in the bench's informer (lists " +
                    std::to_string(s.lists) + ", watches " + std::to_string(s.watches) + ", idle " +
                    std::to_string(s.idle_timeouts) + ", errors " + std::to_string(s.errors) +
                    ", resourceVersion " + informer_->resource_version() + "; " + watch_log_path() +
                    "); " + left[0];
  auto got = call(http::verb::get, pods_path() + "/" + left[0], {}, "application/json", 30s);
  if (got && got->status == 404) {
    why += " is gone from the API server: the informer missed its deletion";
  } else if (tb::ok(got)) {
    why += " is still on the API server";
  } else {
    why += ": " + tb::describe(got);
  }
  std::fprintf(stderr, "error: %s\n", why.c_str());
  return why;
}

// --- scenario 6 -----------------------------------------------------------------------------

// requests per pod: 1 = DELETE, 2 = event POST + DELETE, 3 = status patch + both.
json runner::floor_run(long concurrency, std::size_t per_pod) {
  const int round = ++round_;
  const auto nodes = names("floor-" + std::to_string(round) + "-node-", o_.mass_nodes);
  const auto pods =
      names("floor-" + std::to_string(round) + "-", o_.mass_nodes * o_.mass_pods_per_node);
  static constexpr const char* kinds[] = {"", "DELETE", "event POST + DELETE",
                                          "status patch + event POST + DELETE"};
  std::printf("[floor] %zu pods, %ld in flight, %s\n", pods.size(), concurrency, kinds[per_pod]);
  std::fflush(stdout);
  if (!create_nodes(nodes) ||
      !create_pods(pods, [&](std::size_t i) { return nodes[i % nodes.size()]; }, {})) {
    cleanup();
    return {{"error", "seeding"}};
  }
  writers::event_recorder_options eopts;
  eopts.component = "eviction-compare";
  eopts.reporting_instance = "bench";
  // Every request is an item of its own, interleaved pod by pod, so the client keeps
  // `concurrency` requests in flight whatever their kind (as a controller that sends events
  // beside its deletes).
  tb::batch_options b;
  b.concurrency = concurrency;
  b.deadline = steady::now() + 300s;
  b.tolerated = {};
  b.what = "requests";
  const double server_before = server_cpu_seconds();
  const auto t0 = steady::now();
  const auto t = tb::run_batch(
      io_, *api_, static_cast<long>(pods.size() * per_pod),
      [&](long i) {
        const auto k = static_cast<std::size_t>(i);
        const auto& name = pods[k / per_pod];
        const auto& uid = uid_[name];
        const auto now = std::chrono::system_clock::now();
        std::vector<k8sclient::request> reqs;
        switch (per_pod - 1 - k % per_pod) {
          case 2:
            reqs.push_back(writers::make_disruption_condition_request(o_.ns, name, uid, now));
            break;
          case 1: {
            const tec::controller::pod_ref pod{o_.ns, name, uid};
            reqs.emplace_back(http::verb::post, "/api/v1/namespaces/" + o_.ns + "/events",
                              writers::make_event_body(
                                  writers::involved_object{.ref = pod},
                                  writers::make_event_content(
                                      pod, tec::controller::event_kind::marking_for_deletion),
                                  name + ".bench" + std::to_string(round), eopts, now, now, 1));
            break;
          }
          default:
            reqs.push_back(writers::make_delete_pod_request(o_.ns, name, uid));
        }
        return reqs;
      },
      b);
  const double requests_seconds = tb::seconds_since(t0);
  const double server_cpu = server_cpu_seconds() - server_before;
  const bool done = t.failed == 0 && wait_terminating(pods, steady::now() + 60s, nullptr);
  std::vector<double> at;
  for (const auto& p : pods) {
    if (const auto it = terminating_.find(p); it != terminating_.end()) {
      at.push_back(std::chrono::duration<double>(it->second - t0).count());
    }
  }
  const double seconds = at.empty() ? 0 : *std::max_element(at.begin(), at.end());
  const double complete = std::max(seconds, requests_seconds);
  json r = {{"concurrency", concurrency},
            {"requests_per_pod", per_pod},
            {"pods", pods.size()},
            {"evicted", at.size()},
            {"seconds", seconds},
            {"requests_seconds", requests_seconds},
            {"pods_per_second", seconds > 0 ? static_cast<double>(at.size()) / seconds : 0},
            {"complete_seconds", complete},
            {"complete_per_second", static_cast<double>(pods.size()) / complete}};
  if (!o_.cluster_dir.empty()) {
    r["server_cpu_seconds"] = server_cpu;
    r["server_cpu_share"] = server_cpu / requests_seconds;
  }
  if (!done) {
    r["error"] = t.failed > 0 ? t.first_failure : "not all pods seen terminating";
  }
  std::printf("  all requests answered in %.2f s: %.0f evictions/s\n", complete,
              r["complete_per_second"].get<double>());
  if (!cleanup()) {
    r["error"] = "cleanup failed";
  }
  return r;
}

json runner::floor() {
  json out = json::object();
  json best;
  for (const long c : o_.floor_concurrency) {
    auto r = floor_run(c, 2);
    if (!r.contains("error") && (best.is_null() || r["complete_per_second"].get<double>() >
                                                       best["complete_per_second"].get<double>())) {
      best = r;
    }
    out["runs"].push_back(std::move(r));
  }
  out["best"] = best;
  if (!best.is_null()) {
    out["delete_only"] = floor_run(best["concurrency"].get<long>(), 1);
    out["with_patch"] = floor_run(best["concurrency"].get<long>(), 3);
  }
  return out;
}

double runner::server_cpu_seconds() const {
  if (o_.cluster_dir.empty()) {
    return 0;
  }
  double total = 0;
  for (const char* name : {"kube-apiserver.pid", "etcd.pid"}) {
    std::ifstream in(o_.cluster_dir + "/" + name);
    long pid = 0;
    if (in >> pid && pid > 0) {
      if (const auto s = tb::sample_process(static_cast<pid_t>(pid))) {
        total += s->cpu_seconds;
      }
    }
  }
  return total;
}

/// What the figures were measured on: CPU model and count, memory, kernel, load average.
json machine() {
  json m;
  std::ifstream cpu("/proc/cpuinfo");
  std::string line;
  int cpus = 0;
  while (std::getline(cpu, line)) {
    if (line.rfind("processor", 0) == 0) {
      ++cpus;
    } else if (line.rfind("model name", 0) == 0 && !m.contains("cpu")) {
      m["cpu"] = line.substr(line.find(':') + 2);
    }
  }
  m["cpus"] = cpus;
  std::ifstream mem("/proc/meminfo");
  if (std::getline(mem, line)) {
    m["memory"] = line.substr(line.find_first_not_of(' ', line.find(':') + 1));
  }
  std::ifstream kernel("/proc/sys/kernel/osrelease");
  if (std::getline(kernel, line)) {
    m["kernel"] = line;
  }
  std::ifstream load("/proc/loadavg");
  if (std::getline(load, line)) {
    m["loadavg_at_start"] = line;
  }
  return m;
}

// --- the run --------------------------------------------------------------------------------

int runner::run() {
  std::filesystem::create_directories(o_.out_dir);
  // The bench's own watches log what they do (relists, re-opened watches) to a file: a step
  // that waits for them can then say why it timed out.
  try {
    auto watch = spdlog::basic_logger_mt("watch", watch_log_path(), true);
    watch->set_level(spdlog::level::info);
    watch->flush_on(spdlog::level::info);
  } catch (const spdlog::spdlog_ex& e) {
    std::fprintf(stderr, "warning: no watch log: %s\n", e.what());
  }
  if (!connect()) {
    return 1;
  }
  const auto wanted = [&](const std::string& s) {
    return std::find(o_.scenarios.begin(), o_.scenarios.end(), s) != o_.scenarios.end();
  };
  std::vector<variant> vs;
  for (const auto& c : o_.controllers) {
    if (c == "kcm") {
      vs.push_back({"kcm", "kube-controller-manager v1.20.2"});
    } else if (c == "tec") {
      vs.push_back({"tec", "taint-eviction-controller"});
    } else if (c == "tec-base") {
      vs.push_back({"tec-base", "taint-eviction-controller (--tec-base)"});
    }
  }
  const variant with_cond{"tec+cond", "taint-eviction-controller --disruption-condition"};
  // The DisruptionTarget variant runs in scenarios 1 and 2 (limits lifted) only.
  const bool have_tec =
      std::find(o_.controllers.begin(), o_.controllers.end(), "tec+cond") != o_.controllers.end();

  json results;
  results["machine"] = machine();
  results["config"] = {{"default_qps", o_.default_qps},
                       {"default_burst", o_.default_burst},
                       {"lifted_qps", o_.lifted_qps},
                       {"lifted_burst", o_.lifted_burst},
                       {"mass_nodes", o_.mass_nodes},
                       {"mass_pods_per_node", o_.mass_pods_per_node},
                       {"latency_runs", o_.latency_runs},
                       {"latency_gap_ms", o_.latency_gap_ms},
                       {"latency_lifted", o_.latency_lifted},
                       {"timer_pods", o_.timer_nodes * o_.timer_pods_per_node},
                       {"timer_seconds", o_.timer_seconds},
                       {"burst_pods", o_.burst_pods},
                       {"burst_repeat", o_.burst_repeat},
                       {"memory_nodes", o_.memory_nodes},
                       {"memory_pods", o_.memory_pods},
                       {"scale_nodes", o_.scale_nodes},
                       {"scale_pods", o_.scale_pods},
                       {"scale_outage_nodes", o_.scale_outage_nodes},
                       {"scale_toleration_seconds", o_.scale_toleration_seconds},
                       {"scale_churn_rate", o_.scale_churn_rate},
                       {"scale_churn_seconds", o_.scale_churn_seconds},
                       {"scale_lifted", o_.scale_lifted},
                       {"scale_kcm_monitor", o_.scale_kcm_monitor}};
  const auto save = [&] {
    std::ofstream(o_.out_dir + "/eviction_compare.json") << results.dump(2) << '\n';
  };
  if (wanted("latency")) {
    // In interleaved blocks (A, B, B, A, ...); each contender's samples pooled.
    auto order = vs;
    if (have_tec) {
      order.push_back(with_cond);
    }
    const int blocks = std::min(o_.latency_blocks, o_.latency_runs);
    std::map<std::string, std::vector<json>> parts;
    for (int b = 0; b < blocks; ++b) {
      const int runs = o_.latency_runs / blocks + (b < o_.latency_runs % blocks ? 1 : 0);
      for (const auto& v : order) {
        parts[v.id].push_back(latency(v, runs));
      }
      std::reverse(order.begin(), order.end());
    }
    for (auto& [id, list] : parts) {
      results["latency"][id] = pooled_latency(list);
    }
    save();
  }
  if (wanted("floor")) {
    results["floor"] = floor();
    save();
  }
  if (wanted("mass")) {
    // Interleaved repetitions (KCM, ours, ours with the condition, the floor again; every
    // other repetition in reverse order: A,B,B,A), so a slow spell of the machine hits every
    // contender; the median run is reported.
    auto lifted = vs;
    if (have_tec) {
      lifted.push_back(with_cond);
    }
    std::map<std::string, std::vector<json>> runs;
    for (int rep = 0; rep < o_.mass_repeat; ++rep) {
      auto order = lifted;
      if (rep % 2 == 1) {
        std::reverse(order.begin(), order.end());
      }
      for (const auto& v : order) {
        runs[v.id].push_back(mass(v, o_.lifted_qps, o_.lifted_burst, o_.mass_pods_per_node));
      }
      if (wanted("floor") && results["floor"].contains("best") &&
          !results["floor"]["best"].is_null()) {
        runs["floor"].push_back(floor_run(results["floor"]["best"]["concurrency"].get<long>(), 2));
      }
      results["mass_lifted_runs"] = runs;
      save();
    }
    for (auto& [id, list] : runs) {
      results[id == "floor" ? "floor_repeated" : "mass_lifted"][id == "floor" ? "median" : id] =
          median_run(list, id == "floor" ? "complete_per_second" : "pods_per_second");
    }
    save();
  }
  if (wanted("timer")) {
    // Interleaved as the burst (KCM, ours, ours, KCM, ...); the median run by p99.
    std::map<std::string, std::vector<json>> runs;
    for (int rep = 0; rep < o_.timer_repeat; ++rep) {
      auto order = vs;
      if (rep % 2 == 1) {
        std::reverse(order.begin(), order.end());
      }
      for (const auto& v : order) {
        runs[v.id].push_back(with_retries(timed_attempts, [&] { return timer(v); }));
        results["timer_runs"] = runs;
        save();
      }
    }
    for (auto& [id, list] : runs) {
      results["timer"][id] = median_run(list, "p99_ms");
    }
    save();
  }
  if (wanted("burst")) {
    // Interleaved: KCM, ours, ours, KCM, ... (every other repetition in reverse order), so a
    // slow spell of the machine hits both; the median run by p99 is reported, every run kept.
    std::map<std::string, std::vector<json>> runs;
    for (int rep = 0; rep < o_.burst_repeat; ++rep) {
      auto order = vs;
      if (rep % 2 == 1) {
        std::reverse(order.begin(), order.end());
      }
      for (const auto& v : order) {
        runs[v.id].push_back(
            with_retries(timed_attempts, [&] { return timed(v, "burst", 1, o_.burst_pods, 0); }));
        results["burst_runs"] = runs;
        save();
      }
    }
    for (auto& [id, list] : runs) {
      results["burst"][id] = median_run(list, "p99_ms");
    }
    save();
  }
  if (wanted("mass-default")) {
    for (const auto& v : vs) {
      results["mass_default"][v.id] =
          mass(v, o_.default_qps, o_.default_burst, o_.default_qps_pods_per_node);
      save();
    }
  }
  if (wanted("memory")) {
    results["memory"] = memory(vs);
    save();
  }
  if (wanted("scale")) {
    results["scale"] = scale(vs);
    save();
  }
  if (wanted("apf")) {
    results["apf"] = apf();
    save();
  }
  call(http::verb::delete_, "/api/v1/nodes/tec-bench-canary");
  informer_->stop();
  node_informer_->stop();
  tb::shut_down(io_, *watch_api_);
  tb::shut_down(io_, *api_);
  report(results);
  bool failed = false;
  const std::function<void(const json&)> scan = [&](const json& j) {
    if (j.is_object()) {
      if (j.contains("error")) {
        failed = true;
      }
      for (const auto& [_, child] : j.items()) {
        scan(child);
      }
    } else if (j.is_array()) {
      for (const auto& child : j) {
        scan(child);
      }
    }
  };
  scan(results);
  return failed ? 1 : 0;
}

// --- scenario 8 -----------------------------------------------------------------------------

std::map<std::string, double> runner::apf_counts(const std::string& metric) {
  std::map<std::string, double> out;
  auto res = call(http::verb::get, "/metrics");
  if (!tb::ok(res)) {
    return out;
  }
  // flow_schema/priority_level (flowSchema/priorityLevel in some releases).
  const auto label = [](const std::string& line, const char* a, const char* b) {
    for (const std::string& key : {std::string(a) + "=\"", std::string(b) + "=\""}) {
      if (const auto at = line.find(key); at != std::string::npos) {
        const auto from = at + key.size();
        return line.substr(from, line.find('"', from) - from);
      }
    }
    return std::string();
  };
  std::istringstream in(res->body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(metric + "{", 0) != 0) {
      continue;
    }
    const auto space = line.rfind(' ');
    const std::string key = label(line, "flowSchema", "flow_schema") + " -> " +
                            label(line, "priorityLevel", "priority_level");
    out[key] += std::strtod(line.c_str() + space + 1, nullptr);
  }
  return out;
}

bool runner::kubectl(const std::string& args) const {
  const std::string cmd =
      "kubectl --request-timeout=60s --kubeconfig '" + o_.kubeconfig + "' " + args + " >/dev/null";
  if (std::system(cmd.c_str()) != 0) {  // NOLINT(cert-env33-c): the bench runs kubectl
    std::fprintf(stderr, "error: %s failed\n", cmd.c_str());
    return false;
  }
  return true;
}

json runner::apf() {
  if (o_.cluster_dir.empty()) {
    return {{"error", "the apf scenario needs --cluster-dir (its CA signs KCM's certificate)"}};
  }
  const long most = *std::max_element(o_.apf_accounts.begin(), o_.apf_accounts.end());
  const std::string dir = o_.out_dir + "/apf";
  const std::string setup = std::string(TEC_SOURCE_DIR) + "/bench/apf_setup.sh '" + o_.cluster_dir +
                            "' '" + dir + "' " + std::to_string(most);
  std::printf("[apf] identities: %s\n", setup.c_str());
  std::fflush(stdout);
  std::string server;
  if (FILE* f = popen(setup.c_str(), "r")) {  // NOLINT(cert-env33-c)
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      server = line;
    }
    if (pclose(f) != 0) {
      server.clear();
    }
  }
  while (!server.empty() && (server.back() == '\n' || server.back() == '\r')) {
    server.pop_back();
  }
  if (server.empty()) {
    return {{"error", "bench/apf_setup.sh failed"}};
  }
  apf_ = apf_identities{dir, server};
  // The noise's object: the bench's plain pods, on a node that does not exist (no controller
  // acts on them). (Scale-scenario pods, 5x larger, made each LIST so heavy that on this 2-core
  // machine even kube-controller-manager's leader-election requests timed out.)
  std::printf("[apf] seeding %ld pods in tec-bench-noise\n", o_.apf_noise_pods);
  std::fflush(stdout);
  tb::batch_options b;
  b.concurrency = o_.seed_concurrency;
  b.deadline = steady::now() + 120s + std::chrono::milliseconds{o_.apf_noise_pods * 100};
  b.what = "noise pods created";
  const auto seeded = tb::run_batch(
      io_, *api_, o_.apf_noise_pods,
      [&](long i) {
        return std::vector<k8sclient::request>{
            k8sclient::request(http::verb::post, "/api/v1/namespaces/tec-bench-noise/pods",
                               pod_body("noise-" + std::to_string(i), "tec-bench-noise-node", {}))};
      },
      b);
  json out;
  if (seeded.failed > 0 && seeded.first_failure.find("409") == std::string::npos) {
    apf_.reset();
    return {{"error", "seeding the noise pods: " + seeded.first_failure}};
  }
  const std::vector<variant> vs{{"kcm", "kube-controller-manager v1.20.2"},
                                {"tec+fs", "taint-eviction-controller, deploy/flowschema.yaml"},
                                {"tec", "taint-eviction-controller, no FlowSchema"}};
  for (const long accounts : o_.apf_accounts) {
    const std::string key = std::to_string(accounts) + (accounts == 1 ? "_account" : "_accounts");
    std::map<std::string, std::vector<json>> runs;
    for (int rep = 0; rep < o_.apf_repeat; ++rep) {
      auto order = vs;
      if (rep % 2 == 1) {
        std::reverse(order.begin(), order.end());
      }
      for (const auto& v : order) {
        runs[v.id].push_back(apf_run(v, accounts));
        if (runs[v.id].back().contains("error")) {
          std::printf("  FAILED: %s\n", runs[v.id].back()["error"].get<std::string>().c_str());
          std::fflush(stdout);
        }
      }
    }
    for (auto& [id, list] : runs) {
      out[key][id] = list.size() == 1 ? list.front() : json{{"runs", list}};
    }
  }
  kubectl("delete --ignore-not-found -f '" + dir + "/flowschema.yaml'");
  apf_.reset();
  return out;
}

json runner::apf_run(const variant& v, long accounts) {
  const std::string& dir = apf_->dir;
  std::printf("[apf] %s: noise from %ld service account(s), %d flows\n", v.label.c_str(), accounts,
              o_.apf_flows);
  std::fflush(stdout);
  const bool with_fs = v.id == "tec+fs";
  if (!kubectl(std::string(with_fs ? "apply" : "delete --ignore-not-found") + " -f '" + dir +
               "/flowschema.yaml'")) {
    return {{"error", "FlowSchema apply/delete"}};
  }
  tb::run_for(io_, 2s);  // the API server's APF controller picks the change up
  // Everything the run evicts is created first, on a quiet server: under the noise the bench's
  // own writes (admin, exempt from APF, but not from a saturated CPU) time out.
  const int round = ++round_;
  const std::string prefix = "apf-" + std::to_string(round) + "-";
  const auto single_nodes = names(prefix, o_.apf_latency_runs);
  const auto single_pods = names(prefix + "pod-", o_.apf_latency_runs);
  const auto mass_nodes = names(prefix + "mass-node-", o_.apf_mass_nodes);
  const auto mass_pods =
      names(prefix + "mass-", static_cast<long>(o_.apf_mass_nodes) * o_.apf_mass_pods_per_node);
  if (!create_nodes(single_nodes) || !create_nodes(mass_nodes) ||
      !create_pods(single_pods, [&](std::size_t i) { return single_nodes[i]; }, {}) ||
      !create_pods(mass_pods, [&](std::size_t i) { return mass_nodes[i % mass_nodes.size()]; },
                   {})) {
    cleanup();
    return {{"error", "seeding"}};
  }
  // The taint PATCHes run under the noise: a few tries each (504s happen there).
  const auto taint = [&](const std::vector<std::string>& nodes) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      if (taint_nodes(nodes, "tec-bench/apf", static_cast<long>(nodes.size()))) {
        return true;
      }
    }
    return false;
  };

  std::error_code ec;
  const auto log_from = std::filesystem::file_size(log_path(v), ec);
  tb::child_process child;
  std::string error;
  if (!start(v, o_.lifted_qps, o_.lifted_burst, child, error)) {
    cleanup();
    return {{"error", error}};
  }
  const auto argv = command(v, o_.lifted_qps, o_.lifted_burst);
  int restarts = 0;
  std::vector<std::string> exits;
  // A lost Lease ends the process (ours exits non-zero, KCM with "leaderelection lost"): as a
  // Deployment's kubelet would, start it again and count it.
  const auto keep_running = [&] {
    if (child.running()) {
      return;
    }
    exits.push_back(child.exit_text());
    ++restarts;
    std::printf("  %s exited (%s); restarting it\n", v.label.c_str(), child.exit_text().c_str());
    std::fflush(stdout);
    std::string e;
    if (!child.start(argv, log_path(v), e)) {
      std::fprintf(stderr, "error: restarting %s: %s\n", v.label.c_str(), e.c_str());
    }
  };
  const std::string status = dir + "/noise-" + v.id + "-" + std::to_string(accounts) + ".status";
  std::remove(status.c_str());
  tb::child_process noise;
  const std::vector<std::string> noise_argv{std::string(TEC_SOURCE_DIR) + "/bench/apf_noise.sh",
                                            dir + "/noise.tokens",
                                            apf_->server,
                                            o_.cluster_dir + "/pki/ca.crt",
                                            std::to_string(accounts),
                                            std::to_string(o_.apf_flows),
                                            "1800",
                                            status};
  if (!noise.start(noise_argv, dir + "/noise.log", error)) {
    child.stop(10s);
    cleanup();
    return {{"error", "starting the noise: " + error}};
  }
  const auto t_noise = steady::now();
  const auto dispatched_before = apf_counts("apiserver_flowcontrol_dispatched_requests_total");
  const auto rejected_before = apf_counts("apiserver_flowcontrol_rejected_requests_total");
  tb::run_for(io_, std::chrono::seconds{o_.apf_settle_seconds});

  // Single evictions, one after another: each node tainted, its pod awaited.
  std::vector<double> latencies;
  int missed = 0;
  int untainted = 0;
  for (std::size_t i = 0; i < single_nodes.size(); ++i) {
    keep_running();
    const auto t0 = steady::now();
    if (!taint({single_nodes[i]})) {
      ++untainted;
      continue;
    }
    if (wait_terminating({single_pods[i]}, t0 + std::chrono::seconds{o_.apf_wait_seconds},
                         nullptr)) {
      latencies.push_back(
          std::chrono::duration<double>(terminating_.at(single_pods[i]) - t0).count());
    } else {
      ++missed;
    }
  }

  // A mass eviction: every pod of apf_mass_nodes nodes at once.
  keep_running();
  json mass_out;
  const auto t0 = steady::now();
  if (taint(mass_nodes)) {
    const auto limit = t0 + std::chrono::seconds{std::max(120, o_.apf_wait_seconds * 4)};
    while (!wait_terminating(mass_pods, std::min(limit, steady::now() + 5s), nullptr) &&
           steady::now() < limit) {
      keep_running();
    }
  } else {
    mass_out["error"] = "tainting";
  }
  std::vector<double> at;
  for (const auto& p : mass_pods) {
    if (const auto it = terminating_.find(p); it != terminating_.end()) {
      at.push_back(std::chrono::duration<double>(it->second - t0).count());
    }
  }
  mass_out["pods"] = mass_pods.size();
  mass_out["evicted"] = at.size();
  mass_out["seconds"] = at.empty() ? 0 : *std::max_element(at.begin(), at.end());
  mass_out["p50_ms"] = tb::percentile(at, 50) * 1e3;
  keep_running();
  const double noise_seconds = tb::seconds_since(t_noise);
  // Where the API server put the requests meanwhile (ours, the noise's, KCM's), by flow schema.
  json routing;
  for (const auto& [metric, before] :
       {std::pair{"dispatched", dispatched_before}, std::pair{"rejected", rejected_before}}) {
    for (const auto& [key, n] :
         apf_counts(std::string("apiserver_flowcontrol_") + metric + "_requests_total")) {
      const auto it = before.find(key);
      const double delta = n - (it == before.end() ? 0.0 : it->second);
      if (delta > 0) {
        routing[metric][key] = delta;
      }
    }
  }
  noise.stop(5s);
  child.stop(10s);
  cleanup();

  // The noise's answers: 200 served, 429 rejected by APF, 000 none within 60 s.
  std::map<std::string, long> codes;
  {
    std::ifstream in(status);
    std::string code;
    while (in >> code) {
      ++codes[code];
    }
  }
  // Leadership lost, as each says it in its log (this run's part of it).
  long lost_lines = 0;
  {
    std::ifstream in(log_path(v));
    in.seekg(ec ? 0 : static_cast<std::streamoff>(log_from));
    std::string line;
    while (std::getline(in, line)) {
      if (line.find("lost leadership") != std::string::npos ||
          line.find("leaderelection lost") != std::string::npos) {
        ++lost_lines;
      }
    }
  }
  json out = summary(latencies);
  out["runs"] = o_.apf_latency_runs;
  out["missed"] = missed;
  out["untainted"] = untainted;  // taint PATCHes that failed 5 times (not counted as missed)
  out["mass"] = mass_out;
  out["restarts"] = restarts;
  out["exits"] = exits;
  out["noise_seconds"] = noise_seconds;
  out["noise_codes"] = codes;
  out["lost_leadership_log_lines"] = lost_lines;
  out["apf_routing"] = routing;
  std::printf(
      "  single: %zu/%d evicted within %d s, p50 %s p99 %s; mass %s/%zu in %.1f s; lease lost %d "
      "times; noise %ld x 200, %ld x 429\n",
      latencies.size(), o_.apf_latency_runs, o_.apf_wait_seconds,
      ms(tb::percentile(latencies, 50)).c_str(), ms(tb::percentile(latencies, 99)).c_str(),
      std::to_string(at.size()).c_str(), mass_pods.size(), mass_out.value("seconds", 0.0), restarts,
      codes["200"], codes["429"]);
  std::fflush(stdout);
  return out;
}

// --- the table ------------------------------------------------------------------------------

void runner::report(const json& r) const {
  std::ostringstream md;
  const auto num = [](const json& j, const char* key) -> std::optional<double> {
    if (!j.is_object() || j.contains("error") || !j.contains(key)) {
      return std::nullopt;
    }
    return j[key].get<double>();
  };
  const auto cell = [](std::optional<double> v, int decimals, const char* unit) {
    return v ? fixed(*v, decimals) + unit : std::string("n/a");
  };
  // ratio: how many times better ours is (for "lower is better" pass invert=true).
  const auto ratio = [](std::optional<double> kcm, std::optional<double> ours, bool lower_better) {
    if (!kcm || !ours || *kcm <= 0 || *ours <= 0) {
      return std::string("n/a");
    }
    return fixed(lower_better ? *kcm / *ours : *ours / *kcm, 2) + "x";
  };
  const auto at = [&](const char* a, const char* b) -> const json& {
    static const json none;
    if (!r.contains(a) || !r[a].contains(b)) {
      return none;
    }
    return r[a][b];
  };
  md << "| # | scenario | kube-controller-manager | taint-eviction-controller | ours vs KCM |\n"
     << "|---|---|---|---|---|\n";
  const auto row = [&](const char* id, const std::string& name, std::optional<double> kcm,
                       std::optional<double> ours, int decimals, const char* unit,
                       bool lower_better) {
    md << "| " << id << " | " << name << " | " << cell(kcm, decimals, unit) << " | "
       << cell(ours, decimals, unit) << " | " << ratio(kcm, ours, lower_better) << " |\n";
  };
  row("1", "single-pod eviction latency p50", num(at("latency", "kcm"), "p50_ms"),
      num(at("latency", "tec"), "p50_ms"), 1, " ms", true);
  row("1", "single-pod eviction latency p99", num(at("latency", "kcm"), "p99_ms"),
      num(at("latency", "tec"), "p99_ms"), 1, " ms", true);
  const auto mass_rows = [&](const char* key, const std::string& what) {
    row("2", what + ": time to evict all", num(at(key, "kcm"), "seconds"),
        num(at(key, "tec"), "seconds"), 2, " s", true);
    row("2", what + ": throughput", num(at(key, "kcm"), "pods_per_second"),
        num(at(key, "tec"), "pods_per_second"), 0, " pods/s", false);
    row("2", what + ": until the last event is written too",
        num(at(key, "kcm"), "complete_seconds"), num(at(key, "tec"), "complete_seconds"), 2, " s",
        true);
    row("5", what + ": controller CPU", num(at(key, "kcm"), "cpu_seconds"),
        num(at(key, "tec"), "cpu_seconds"), 2, " s", true);
  };
  const auto mass_pods = std::to_string(o_.mass_nodes * o_.mass_pods_per_node);
  mass_rows("mass_lifted", "mass eviction, " + mass_pods + " pods, limits lifted");
  mass_rows("mass_default",
            "mass eviction, " + std::to_string(o_.mass_nodes * o_.default_qps_pods_per_node) +
                " pods, QPS " + fixed(o_.default_qps, 0) + "/" + std::to_string(o_.default_burst));
  row("3", "timer error p50", num(at("timer", "kcm"), "p50_ms"), num(at("timer", "tec"), "p50_ms"),
      1, " ms", true);
  row("3", "timer error p99", num(at("timer", "kcm"), "p99_ms"), num(at("timer", "tec"), "p99_ms"),
      1, " ms", true);
  const auto burst = "burst, " + std::to_string(o_.burst_pods) + " pods on one node due at once";
  row("3", burst + ": first deletion's error", num(at("burst", "kcm"), "min_ms"),
      num(at("burst", "tec"), "min_ms"), 1, " ms", true);
  row("3", burst + ": error p50", num(at("burst", "kcm"), "p50_ms"),
      num(at("burst", "tec"), "p50_ms"), 1, " ms", true);
  row("3", burst + ": error p99", num(at("burst", "kcm"), "p99_ms"),
      num(at("burst", "tec"), "p99_ms"), 1, " ms", true);
  for (const long pods : o_.memory_pods) {
    const auto& m = r.contains("memory") && r["memory"].contains(std::to_string(pods))
                        ? r["memory"][std::to_string(pods)]
                        : json();
    const json none;
    row("4",
        "RSS, " + std::to_string(pods) + " pods + " + std::to_string(o_.memory_nodes) +
            " nodes cached",
        num(m.contains("kcm") ? m["kcm"] : none, "rss_mib"),
        num(m.contains("tec") ? m["tec"] : none, "rss_mib"), 1, " MiB", true);
  }
  if (r.contains("scale")) {
    const auto& sc = r["scale"];
    const std::string limits = sc.contains("qps")
                                   ? "QPS " + fixed(sc["qps"].get<double>(), 0) + "/" +
                                         std::to_string(sc["burst"].get<long>()) +
                                         (o_.scale_lifted ? " (lifted)" : " (client defaults)")
                                   : std::string("?");
    const json none;
    const auto of = [&](long pods, const char* who) -> const json& {
      const auto key = std::to_string(pods);
      return sc.contains(key) && sc[key].contains(who) ? sc[key][who] : none;
    };
    const auto sub = [&](const json& j, const char* key) -> const json& {
      return j.is_object() && j.contains(key) ? j[key] : none;
    };
    for (const long pods : o_.scale_pods) {
      const auto n = std::to_string(pods) + " pods, " + std::to_string(o_.scale_nodes) + " nodes";
      row("7", "scale: synced and acting, " + n, num(of(pods, "kcm"), "ready_seconds"),
          num(of(pods, "tec"), "ready_seconds"), 2, " s", true);
      row("7", "scale: CPU during sync, " + n, num(of(pods, "kcm"), "cpu_sync_seconds"),
          num(of(pods, "tec"), "cpu_sync_seconds"), 2, " s", true);
      row("7", "scale: RSS steady, " + n, num(of(pods, "kcm"), "rss_mib"),
          num(of(pods, "tec"), "rss_mib"), 1, " MiB", true);
      row("7", "scale: RSS peak, " + n, num(of(pods, "kcm"), "peak_rss_mib"),
          num(of(pods, "tec"), "peak_rss_mib"), 1, " MiB", true);
    }
    if (!o_.scale_pods.empty()) {
      const long largest = o_.scale_pods.back();
      const auto& k = sub(of(largest, "kcm"), "outage");
      const auto& t = sub(of(largest, "tec"), "outage");
      const auto what = ", " + std::to_string(o_.scale_outage_nodes) + " nodes unreachable" +
                        (t.contains("pods") ? ", " + std::to_string(t["pods"].get<long>()) + " pods"
                                            : std::string()) +
                        ", " + limits;
      row("7", "scale: outage error p50" + what, num(k, "p50_ms"), num(t, "p50_ms"), 1, " ms",
          true);
      row("7", "scale: outage error p99" + what, num(k, "p99_ms"), num(t, "p99_ms"), 1, " ms",
          true);
      row("7", "scale: outage error max" + what, num(k, "max_ms"), num(t, "max_ms"), 1, " ms",
          true);
      row("7", "scale: outage issue rate (" + limits + ")", num(k, "pods_per_second"),
          num(t, "pods_per_second"), 0, " pods/s", false);
      row("7",
          "scale: CPU per pod update (" + std::to_string(o_.scale_churn_rate) +
              " updates/s, idle CPU subtracted)",
          num(sub(of(largest, "kcm"), "churn"), "cpu_us_per_update"),
          num(sub(of(largest, "tec"), "churn"), "cpu_us_per_update"), 1, " us", true);
    }
  }
  md << "\n";
  if (r.contains("floor") && r["floor"].contains("best") && !r["floor"]["best"].is_null()) {
    const auto& f = r["floor"];
    // The repeated floor runs (interleaved with the mass evictions) give the median.
    const json& repeated = r.contains("floor_repeated") ? r["floor_repeated"]["median"] : json();
    const double floor_rate = num(repeated, "complete_per_second")
                                  .value_or(f["best"]["complete_per_second"].get<double>());
    md << "Floor (6): a tight C++ client sending an event POST and a DELETE per pod answers all "
          "of them at "
       << fixed(floor_rate, 0) << " evictions/s with " << f["best"]["concurrency"].get<long>()
       << " requests in flight (runs:";
    for (const auto& run : f["runs"]) {
      md << " " << run.value("concurrency", 0L) << " -> "
         << (run.contains("error") ? std::string("failed")
                                   : fixed(run["complete_per_second"].get<double>(), 0));
    }
    md << ")";
    if (repeated.is_object() && repeated.contains("runs")) {
      md << "; repeated beside the mass evictions: median " << fixed(floor_rate, 0) << " (runs "
         << repeated["runs"].dump() << ")";
    }
    if (const auto d =
            num(f.contains("delete_only") ? f["delete_only"] : json(), "complete_per_second")) {
      md << "; DELETE alone: " << fixed(*d, 0) << " pods/s";
    }
    if (const auto p =
            num(f.contains("with_patch") ? f["with_patch"] : json(), "complete_per_second")) {
      md << "; with the status patch as well: " << fixed(*p, 0) << " pods/s";
    }
    md << ".\n";
    // Like for like: a controller is done when its last DELETE and its last event are in.
    if (const auto ours = num(at("mass_lifted", "tec"), "complete_per_second")) {
      md << "Ours, limits lifted, deletes and events all written: " << fixed(*ours, 0)
         << " evictions/s, " << fixed(*ours / floor_rate * 100, 0) << "% of the floor.";
    }
    if (const auto kcm = num(at("mass_lifted", "kcm"), "complete_per_second")) {
      md << " kube-controller-manager: " << fixed(*kcm, 0) << " evictions/s, "
         << fixed(*kcm / floor_rate * 100, 0) << "%.";
    }
    md << "\n";
  }
  if (const auto k = num(at("mass_lifted", "kcm"), "server_cpu_share")) {
    if (const auto t = num(at("mass_lifted", "tec"), "server_cpu_share")) {
      md << "kube-apiserver + etcd during the mass eviction with limits lifted: " << fixed(*k, 2)
         << " cores busy under kube-controller-manager, " << fixed(*t, 2) << " under ours";
      if (r.contains("machine")) {
        md << " (of " << r["machine"].value("cpus", 0) << ")";
      }
      md << ".\n";
    }
  }
  if (r.contains("mass_lifted_runs")) {
    md << "Mass eviction with limits lifted, pods/s of each interleaved repetition (the table "
          "shows the median run):";
    for (const auto& [id, list] : r["mass_lifted_runs"].items()) {
      md << " " << id << " [";
      for (std::size_t i = 0; i < list.size(); ++i) {
        const auto& run = list[i];
        md << (i > 0 ? ", " : "")
           << (run.contains("error")
                   ? std::string("failed")
                   : fixed(
                         run.value(id == "floor" ? "complete_per_second" : "pods_per_second", 0.0),
                         0));
      }
      md << "]";
    }
    md << ".\n";
  }
  // The runs of a repeated timed scenario, each as "A/B ms" (the values of keys `first` and
  // `second`, `digits` after the point), in the order they ran.
  const auto each_run = [&](const char* key, const std::string& title, const char* first,
                            const char* second, int digits) {
    md << title << " of each run, in the order they ran by repetition (the table shows the "
       << "median run by p99):";
    for (const auto& [id, list] : r[key].items()) {
      md << " " << id << " [";
      for (std::size_t i = 0; i < list.size(); ++i) {
        const auto& run = list[i];
        md << (i > 0 ? ", " : "")
           << (run.contains("error") ? std::string("failed")
                                     : fixed(run.value(first, 0.0), digits) + "/" +
                                           fixed(run.value(second, 0.0), digits) + " ms");
      }
      md << "]";
    }
    md << ".\n";
  };
  if (r.contains("timer_runs") && o_.timer_repeat > 1) {
    each_run("timer_runs", "Timer, error p50 / p99", "p50_ms", "p99_ms", 1);
  }
  if (r.contains("burst_runs")) {
    each_run("burst_runs", "Burst, first deletion's error / p99", "min_ms", "p99_ms", 0);
  }
  const auto cond = at("mass_lifted", "tec+cond");
  if (const auto c = num(cond, "pods_per_second")) {
    md << "\nDisruptionTarget condition on (one more request per pod), limits lifted: "
       << fixed(*c, 0) << " pods/s";
    if (const auto off = num(at("mass_lifted", "tec"), "pods_per_second")) {
      md << " against " << fixed(*off, 0) << " off (" << fixed(*c / *off * 100, 0) << "%)";
    }
    if (const auto l = num(at("latency", "tec+cond"), "p50_ms")) {
      md << "; single-pod latency p50 " << fixed(*l, 1) << " ms";
    }
    if (const auto cpu = num(cond, "cpu_seconds")) {
      md << "; CPU " << fixed(*cpu, 2) << " s";
    }
    md << ".\n";
  }
  if (r.contains("apf") && r["apf"].is_object()) {
    md << "\n### API Priority and Fairness (in-cluster identities, workload-low flooded)\n\n"
       << "| noise from | controller | single p50 | single p99 | missed | mass evicted | mass "
          "seconds | lease lost | noise 200 / 429 |\n|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& [accounts, per] : r["apf"].items()) {
      if (!per.is_object()) {
        continue;
      }
      for (const auto& [id, res] : per.items()) {
        if (!res.is_object() || res.contains("error") || !res.contains("mass")) {
          continue;
        }
        const auto& codes = res.value("noise_codes", json::object());
        const json& m = res["mass"];
        md << "| " << accounts << " | " << id << " | " << fixed(res.value("p50_ms", 0.0), 0)
           << " ms | " << fixed(res.value("p99_ms", 0.0), 0) << " ms | " << res.value("missed", 0)
           << "/" << res.value("runs", 0) << " | " << m.value("evicted", 0) << "/"
           << m.value("pods", 0) << " | " << fixed(m.value("seconds", 0.0), 1) << " | "
           << res.value("restarts", 0) << " | " << codes.value("200", 0) << " / "
           << codes.value("429", 0) << " |\n";
      }
    }
  }
  for (const auto& [scenario, per] : r.items()) {
    if (!per.is_object()) {
      continue;
    }
    if (per.contains("error") && per["error"].is_string()) {
      md << "\nFAILED: " << scenario << ": " << per["error"].get<std::string>() << "\n";
    }
    for (const auto& [who, res] : per.items()) {
      if (res.is_object() && res.contains("error")) {
        md << "\nFAILED: " << scenario << " / " << who << ": " << res["error"].get<std::string>()
           << "\n";
      }
      // The scale scenario nests one level deeper: scale / pods / controller / step.
      if (scenario == "scale" && res.is_object()) {
        for (const auto& [id, c] : res.items()) {
          const auto failed = [&](const json& j, const std::string& where) {
            if (j.is_object() && j.contains("error")) {
              md << "\nFAILED: scale / " << who << " pods / " << where << ": "
                 << j["error"].get<std::string>() << "\n";
            }
          };
          failed(c, id);
          if (c.is_object()) {
            for (const char* step : {"churn", "outage"}) {
              failed(c.contains(step) ? c[step] : json(), id + " / " + step);
            }
          }
        }
      }
    }
  }
  if (r.contains("machine")) {
    const auto& m = r["machine"];
    md << "\nMachine: " << m.value("cpu", "?") << ", " << m.value("cpus", 0) << " CPUs, "
       << m.value("memory", "?") << ", Linux " << m.value("kernel", "?")
       << "; load average at the start: " << m.value("loadavg_at_start", "?") << ".\n";
  }
  std::ofstream(o_.out_dir + "/eviction_compare.md") << md.str();
  std::printf("\n%s\nresults: %s/eviction_compare.{md,json}; controller logs in %s\n",
              md.str().c_str(), o_.out_dir.c_str(), o_.out_dir.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"kube-controller-manager's taint manager and ours, side by side (BENCHMARKS.md)"};
  app.add_option("--kubeconfig", o.kubeconfig, "Admin kubeconfig of the API server")->required();
  app.add_option("--kcm", o.kcm, "kube-controller-manager binary");
  app.add_option("--tec", o.tec, "taint-eviction-controller binary");
  app.add_option("--tec-base", o.tec_base,
                 "Another taint-eviction-controller binary, controller tec-base (before/after)");
  app.add_option("--tec-arg", o.tec_args, "An extra flag for taint-eviction-controller (repeat)")
      ->allow_extra_args(false);
  app.add_option("--cluster-dir", o.cluster_dir,
                 "cluster.sh state directory: the API server's and etcd's CPU time is reported");
  app.add_option("--out-dir", o.out_dir, "Where results and controller logs go");
  app.add_option("--namespace", o.ns, "Namespace of the bench pods");
  app.add_option("--scenarios", o.scenarios,
                 "latency, floor, mass (limits lifted), timer, burst (one node's pods due at "
                 "once), mass-default (QPS 20/30), memory, scale (not by default; make "
                 "bench-scale), apf (not by default; make bench-apf)")
      ->delimiter(',');
  app.add_option("--controllers", o.controllers,
                 "kcm, tec, tec+cond (--disruption-condition), tec-base (--tec-base)")
      ->delimiter(',');
  app.add_option("--latency-runs", o.latency_runs)->check(CLI::Range(1, 10'000));
  app.add_option("--latency-blocks", o.latency_blocks)->check(CLI::Range(1, 100));
  app.add_option("--burst-pods", o.burst_pods)->check(CLI::Range(1, 100'000));
  app.add_option("--burst-repeat", o.burst_repeat)->check(CLI::Range(1, 100));
  app.add_option("--timer-repeat", o.timer_repeat)->check(CLI::Range(1, 100));
  app.add_option("--latency-gap-ms", o.latency_gap_ms,
                 "Idle milliseconds between a latency run's pod being seen and its taint "
                 "(bench/single_eviction.py's pattern: 1500)")
      ->check(CLI::Range(0, 600'000));
  app.add_flag("--latency-lifted", o.latency_lifted,
               "Run the latency scenario with the client limits lifted (not QPS 20/30)");
  app.add_option("--mass-nodes", o.mass_nodes)->check(CLI::Range(1, 10'000));
  app.add_option("--mass-pods-per-node", o.mass_pods_per_node)->check(CLI::Range(1, 10'000));
  app.add_option("--mass-repeat", o.mass_repeat)->check(CLI::Range(1, 100));
  app.add_option("--default-qps-pods-per-node", o.default_qps_pods_per_node,
                 "Pods per node of the mass eviction at the default QPS")
      ->check(CLI::Range(1, 10'000));
  app.add_option("--timer-nodes", o.timer_nodes)->check(CLI::Range(1, 10'000));
  app.add_option("--timer-pods-per-node", o.timer_pods_per_node)->check(CLI::Range(1, 10'000));
  app.add_option("--timer-spacing-ms", o.timer_spacing_ms, "Milliseconds between the timer taints")
      ->check(CLI::Range(1, 10'000));
  app.add_option("--apf-accounts", o.apf_accounts,
                 "Service accounts the apf scenario's noise comes from, one run each")
      ->delimiter(',')
      ->check(CLI::Range(1, 1'000));
  app.add_option("--apf-flows", o.apf_flows, "Concurrent LIST loops of the apf noise")
      ->check(CLI::Range(1, 1'000));
  app.add_option("--apf-noise-pods", o.apf_noise_pods, "Pods each apf noise LIST returns")
      ->check(CLI::Range(1, 200'000));
  app.add_option("--apf-latency-runs", o.apf_latency_runs)->check(CLI::Range(1, 10'000));
  app.add_option("--apf-wait-seconds", o.apf_wait_seconds,
                 "How long a single eviction under the apf noise may take before it is missed")
      ->check(CLI::Range(1, 3'600));
  app.add_option("--apf-mass-nodes", o.apf_mass_nodes)->check(CLI::Range(1, 10'000));
  app.add_option("--apf-mass-pods-per-node", o.apf_mass_pods_per_node)
      ->check(CLI::Range(1, 10'000));
  app.add_option("--apf-repeat", o.apf_repeat)->check(CLI::Range(1, 100));
  app.add_option("--apf-settle-seconds", o.apf_settle_seconds,
                 "Seconds of noise before the apf scenario's first measurement")
      ->check(CLI::Range(0, 3'600));
  app.add_option("--memory-nodes", o.memory_nodes)->check(CLI::Range(1, 100'000));
  app.add_option("--memory-pods", o.memory_pods, "Pod counts, ascending")->delimiter(',');
  app.add_option("--floor-concurrency", o.floor_concurrency)->delimiter(',');
  app.add_option("--scale-nodes", o.scale_nodes, "Nodes of the scale scenario")
      ->check(CLI::Range(1, 100'000));
  app.add_option("--scale-pods", o.scale_pods,
                 "Pod counts of the scale scenario, ascending (measured at each; the outage and "
                 "the churn at the largest)")
      ->delimiter(',');
  app.add_option("--scale-outage-nodes", o.scale_outage_nodes,
                 "Nodes of the zone outage (node.kubernetes.io/unreachable:NoExecute at once)")
      ->check(CLI::Range(1, 100'000));
  app.add_option("--scale-toleration-seconds", o.scale_toleration_seconds,
                 "tolerationSeconds of the outage's pods (the default 300 s shortened)")
      ->check(CLI::Range(0, 3'600));
  app.add_option("--scale-churn-rate", o.scale_churn_rate, "Pod updates per second of the churn")
      ->check(CLI::Range(1, 100'000));
  app.add_option("--scale-churn-seconds", o.scale_churn_seconds)->check(CLI::Range(1, 3'600));
  app.add_flag("--scale-lifted", o.scale_lifted,
               "Run the scale scenario with the client limits lifted (not QPS 20/30)");
  app.add_flag("--scale-kcm-monitor", o.scale_kcm_monitor,
               "Keep kube-controller-manager's node monitor on in the scale scenario (it then "
               "re-taints the outage's zone at --node-eviction-rate and paces the evictions)");
  app.add_option("--scale-sync-repeat", o.scale_sync_repeat,
                 "Sync measurements per controller and pod count, interleaved (median reported)")
      ->check(CLI::Range(1, 20));
  app.add_option("--restart-apiserver", o.restart_apiserver,
                 "Shell command restarting the control plane (same address and credentials), "
                 "run after seeding each size of the scale scenario, before its syncs");
  app.add_flag("--scale-keep", o.scale_keep,
               "Leave the scale scenario's nodes and pods in the cluster afterwards, and keep "
               "what a run left at the start (with --controllers none: seed a cluster to "
               "profile a controller by hand; later runs with it reuse the seed, so give them "
               "the same --scale-nodes, --scale-outage-nodes and --scale-toleration-seconds)");
  app.add_flag("--quick", o.quick, "A small run to check that everything works (minutes)");
  CLI11_PARSE(app, argc, argv);
  const auto needs = [&](const char* c) {
    return std::find(o.controllers.begin(), o.controllers.end(), c) != o.controllers.end();
  };
  if ((needs("kcm") && o.kcm.empty()) || ((needs("tec") || needs("tec+cond")) && o.tec.empty())) {
    std::fputs("error: --kcm and --tec name the binaries of the controllers compared\n", stderr);
    return 2;
  }
  if (needs("tec-base") && o.tec_base.empty()) {
    std::fputs("error: controller tec-base needs --tec-base BINARY\n", stderr);
    return 2;
  }
  if (!std::is_sorted(o.memory_pods.begin(), o.memory_pods.end())) {
    std::fputs("error: --memory-pods must be ascending\n", stderr);
    return 2;
  }
  if (o.scale_pods.empty() || !std::is_sorted(o.scale_pods.begin(), o.scale_pods.end()) ||
      o.scale_pods.front() < 1) {
    std::fputs("error: --scale-pods must be positive and ascending\n", stderr);
    return 2;
  }
  if (o.quick) {
    o.latency_runs = 5;
    o.mass_nodes = 10;
    o.mass_pods_per_node = 20;
    o.default_qps_pods_per_node = 5;
    o.timer_nodes = 50;
    o.burst_pods = 50;
    o.burst_repeat = 1;
    o.memory_nodes = 20;
    o.memory_pods = {200, 1'000};
    o.memory_settle_seconds = 2;
    o.floor_concurrency = {32};
    o.mass_repeat = 1;
    o.scale_nodes = 50;
    o.scale_pods = {200, 400};
    o.scale_outage_nodes = 10;
    o.scale_toleration_seconds = 5;
    o.scale_churn_rate = 20;
    o.scale_churn_seconds = 5;
    // At this size the scale scenario is cheap: --quick runs it unless --scenarios is given.
    if (app.count("--scenarios") == 0) {
      o.scenarios.emplace_back("scale");
    }
  }
  // The informers' warnings (an idle watch re-opened) would break up the progress lines.
  spdlog::set_level(spdlog::level::err);
  tb::stop_children_on_signals();
  runner r(std::move(o));
  return r.run();
}
