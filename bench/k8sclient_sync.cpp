// k8sclient_sync_bench: the time a fresh pod informer needs for its initial sync of N pods from
// a real kube-apiserver (issue 5), and the memory the synced cache costs.
//
//   k8sclient_sync_bench --kubeconfig PATH [--pods N] [--nodes M] [--namespace NS]
//                        [--concurrency C] [--reps R]
//
// 1. Seeds the namespace with N pods bound (spec.nodeName) to M nodes, unless it already holds
//    N pods: the nodes, then the pods, created by C concurrent POSTs without client-side rate
//    limiting. Every pod has two tolerations of its own; DefaultTolerationSeconds admission adds
//    the not-ready/unreachable ones, so a pod looks like a real one to the controller's cache.
// 2. R times: a fresh client, store and pod_informer; the wall time from starting the informer
//    until has_synced(), and the growth of VmRSS (/proc/self/status) across it.
//
// A benchmark program, not a test: it writes to the cluster it is pointed at and is not
// registered with ctest. Single-threaded: everything runs on one io_context. Every wait is
// bounded; failures are reported on stderr with exit status 1 (2 for bad usage).

#include <spdlog/spdlog.h>
#include <unistd.h>
#include <algorithm>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench_support.hpp"
#include "tec/informers/informers.hpp"
#include "tec/informers/store.hpp"
#include "tec/k8sclient/client.hpp"
#include "tec/k8sclient/config.hpp"

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace informers = tec::informers;
namespace k8sclient = tec::k8sclient;
using namespace std::chrono_literals;
namespace tb = tec::bench;
using steady = std::chrono::steady_clock;
using tb::run_until;
using tb::seconds_since;
using tb::shut_down;

struct options {
  std::string kubeconfig;
  long pods = 50'000;
  long nodes = 500;
  std::string namespace_ = "tec-sync-bench";
  long concurrency = 32;
  long reps = 3;
};

void usage(std::FILE* out) {
  std::fputs(
      "usage: k8sclient_sync_bench --kubeconfig PATH [--pods N] [--nodes M] [--namespace NS]\n"
      "                            [--concurrency C] [--reps R]\n"
      "  --pods N         pods to seed and sync (default 50000)\n"
      "  --nodes M        nodes the pods are spread over (default 500)\n"
      "  --namespace NS   namespace of the seeded pods (default tec-sync-bench)\n"
      "  --concurrency C  POSTs in flight while seeding (default 32)\n"
      "  --reps R         timed initial syncs (default 3)\n",
      out);
}

std::optional<long> parse_count(const std::string& text, long min, long max) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0' || v < min || v > max) {
    return std::nullopt;
  }
  return v;
}

std::optional<options> parse_args(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      usage(stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "error: %s needs a value\n", argv[i]);
      return std::nullopt;
    }
    const std::string value = argv[++i];
    std::optional<long> n;
    if (flag == "--kubeconfig") {
      o.kubeconfig = value;
      continue;
    }
    if (flag == "--namespace") {
      o.namespace_ = value;
      continue;
    }
    if (flag == "--pods") {
      n = parse_count(value, 1, 10'000'000);
      o.pods = n.value_or(0);
    } else if (flag == "--nodes") {
      n = parse_count(value, 1, 100'000);
      o.nodes = n.value_or(0);
    } else if (flag == "--concurrency") {
      n = parse_count(value, 1, 1'024);
      o.concurrency = n.value_or(0);
    } else if (flag == "--reps") {
      n = parse_count(value, 1, 100);
      o.reps = n.value_or(0);
    } else {
      std::fprintf(stderr, "error: unknown flag %s\n", argv[i - 1]);
      return std::nullopt;
    }
    if (!n) {
      std::fprintf(stderr, "error: bad value for %s: '%s'\n", argv[i - 1], value.c_str());
      return std::nullopt;
    }
  }
  if (o.kubeconfig.empty()) {
    std::fputs("error: --kubeconfig is required\n", stderr);
    return std::nullopt;
  }
  return o;
}

/// VmRSS of this process in bytes; 0 if /proc is not readable.
std::uint64_t rss_bytes() {
  const auto s = tb::sample_process(::getpid());
  return s ? s->rss_bytes : 0;
}

std::string node_body(const std::string& name) {
  return R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + name +
         R"(","labels":{"tec-sync-bench":"true"}}})";
}

std::string pod_body(const std::string& name, const std::string& node) {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
         R"(","labels":{"app":"tec-sync-bench"}},"spec":{"nodeName":")" + node +
         R"(","containers":[{"name":"pause","image":"registry.k8s.io/pause:3.9"}],)"
         R"("tolerations":[{"key":"example.com/maintenance","operator":"Exists",)"
         R"("effect":"NoExecute","tolerationSeconds":600},)"
         R"({"key":"example.com/dedicated","operator":"Equal","value":"bench",)"
         R"("effect":"NoSchedule"}]}})";
}

std::string pod_name(long i) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "sync-bench-%07ld", i);
  return buf;
}

std::string node_name(long i) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "sync-bench-node-%05ld", i);
  return buf;
}

/// Creates objects [0, count) with `c` POSTs in flight; 409 counts as "existed".
tb::tally create_all(asio::io_context& io, k8sclient::client& api, long count, long c,
                     const std::function<std::string(long)>& target,
                     const std::function<std::string(long)>& body, steady::time_point deadline,
                     const char* what) {
  tb::batch_options b;
  b.concurrency = c;
  b.tolerated = {409};
  b.deadline = deadline;
  b.what = what;
  return tb::run_batch(
      io, api, count,
      [&](long i) {
        return std::vector<k8sclient::request>{
            k8sclient::request(http::verb::post, target(i), body(i))};
      },
      b);
}

int seed(asio::io_context& io, const k8sclient::rest_config& config, const options& o) {
  k8sclient::client_options copts;
  copts.qps = 0;
  copts.max_connections = static_cast<std::size_t>(o.concurrency);
  copts.dial_timeout = 10s;
  copts.max_retries = 3;
  k8sclient::client api(io.get_executor(), config, copts);

  auto ns =
      tb::call(io, api,
               k8sclient::request(http::verb::post, "/api/v1/namespaces",
                                  R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")" +
                                      o.namespace_ + R"("}})"));
  if (!ns || (ns->status != 201 && ns->status != 409)) {
    std::fprintf(stderr, "error: creating namespace %s: %s\n", o.namespace_.c_str(),
                 ns ? ("HTTP " + std::to_string(ns->status) + ": " + ns->body).c_str()
                    : ns.error().message.c_str());
    return 1;
  }
  auto have = tb::count_objects(io, api, "/api/v1/namespaces/" + o.namespace_ + "/pods");
  if (!have) {
    std::fprintf(stderr, "error: counting pods in %s: %s\n", o.namespace_.c_str(),
                 have.error().message.c_str());
    return 1;
  }
  if (have.value() >= o.pods) {
    std::printf("seed: namespace %s already holds %ld pods (>= %ld), not seeding\n",
                o.namespace_.c_str(), have.value(), o.pods);
    shut_down(io, api);
    return 0;
  }
  std::printf(
      "seed: namespace %s holds %ld pods; creating %ld nodes and %ld pods, %ld in "
      "flight\n",
      o.namespace_.c_str(), have.value(), o.nodes, o.pods, o.concurrency);
  std::fflush(stdout);

  const auto node_start = steady::now();
  const auto nodes = create_all(
      io, api, o.nodes, o.concurrency, [](long) { return std::string("/api/v1/nodes"); },
      [](long i) { return node_body(node_name(i)); }, node_start + 60s + o.nodes * 100ms, "nodes");
  std::printf("seed: nodes: %ld created, %ld existed, %ld failed in %.1f s\n", nodes.ok,
              nodes.tolerated, nodes.failed, seconds_since(node_start));
  if (nodes.failed > 0) {
    std::fprintf(stderr, "error: creating nodes: %s\n", nodes.first_failure.c_str());
    return 1;
  }

  const std::string target = "/api/v1/namespaces/" + o.namespace_ + "/pods";
  const long node_count = o.nodes;
  const auto pod_start = steady::now();
  const auto pods = create_all(
      io, api, o.pods, o.concurrency, [target](long) { return target; },
      [node_count](long i) { return pod_body(pod_name(i), node_name(i % node_count)); },
      pod_start + 60s + o.pods * 20ms, "pods");
  const double secs = seconds_since(pod_start);
  std::printf("seed: pods: %ld created, %ld existed, %ld failed in %.1f s: %.0f pods/s created\n",
              pods.ok, pods.tolerated, pods.failed, secs, static_cast<double>(pods.ok) / secs);
  shut_down(io, api);
  if (pods.failed > 0) {
    std::fprintf(stderr, "error: creating pods: %s\n", pods.first_failure.c_str());
    return 1;
  }
  return 0;
}

struct sync_sample {
  double seconds = 0;
  std::size_t store_size = 0;
  std::size_t handler_adds = 0;
  std::int64_t rss_growth = 0;
};

/// One initial sync with a fresh client, store and informer; nullopt on timeout.
std::optional<sync_sample> measure_sync(const k8sclient::rest_config& config,
                                        std::chrono::seconds limit) {
  asio::io_context io;
  const auto rss_before = rss_bytes();
  const auto start = steady::now();
  auto api =
      std::make_unique<k8sclient::client>(io.get_executor(), config, k8sclient::client_options{});
  auto store = std::make_unique<informers::pod_store>();
  std::size_t adds = 0;
  auto informer = std::make_unique<informers::pod_informer>(
      *api, *store,
      [&adds](const informers::pod_record* old_object, const informers::pod_record*) {
        if (old_object == nullptr) {
          ++adds;
        }
      },
      k8sclient::reflector_options{});
  bool finished = false;
  asio::co_spawn(io, informer->run(), [&finished](const std::exception_ptr&) { finished = true; });
  const bool synced = run_until(
      io, [&] { return informer->has_synced(); }, start + limit);
  sync_sample sample;
  sample.seconds = seconds_since(start);
  sample.store_size = store->size();
  sample.handler_adds = adds;
  sample.rss_growth =
      static_cast<std::int64_t>(rss_bytes()) - static_cast<std::int64_t>(rss_before);
  informer->stop();
  api->shutdown();
  run_until(
      io, [&] { return finished; }, steady::now() + 10s);
  if (!synced) {
    const auto stats = informer->stats();
    std::fprintf(stderr, "error: no initial sync within %lld s (lists %llu, errors %llu)\n",
                 static_cast<long long>(limit.count()),
                 static_cast<unsigned long long>(stats.lists),
                 static_cast<unsigned long long>(stats.errors));
    return std::nullopt;
  }
  return sample;
}

}  // namespace

int main(int argc, char** argv) {
  const auto opts = parse_args(argc, argv);
  if (!opts) {
    usage(stderr);
    return 2;
  }
  // The informer's "listed N pods" lines would break up the table; warnings still show.
  spdlog::set_level(spdlog::level::warn);
  auto config = k8sclient::load_kubeconfig(opts->kubeconfig);
  if (!config) {
    std::fprintf(stderr, "error: %s\n", config.error().message.c_str());
    return 1;
  }
  const std::string server = (config->tls ? "https://" : "http://") + config->host + ":" +
                             config->port + config->base_path;

  asio::io_context io;
  {
    k8sclient::client_options copts;
    copts.dial_timeout = 5s;
    copts.request_timeout = 10s;
    copts.max_retries = 1;
    k8sclient::client probe(io.get_executor(), config.value(), copts);
    auto version = tb::call(io, probe, k8sclient::request(http::verb::get, "/version"), 20s);
    shut_down(io, probe);
    if (!version || version->status != 200) {
      std::fprintf(stderr, "error: API server %s is not reachable: %s\n", server.c_str(),
                   version ? ("HTTP " + std::to_string(version->status) + ": " +
                              version->body.substr(0, 300))
                                 .c_str()
                           : version.error().message.c_str());
      return 1;
    }
    std::string git_version = "?";
    try {
      git_version = nlohmann::json::parse(version->body).value("gitVersion", "?");
    } catch (const nlohmann::json::exception& e) {
      git_version = std::string("(unparsable /version: ") + e.what() + ")";
    }
    std::printf("API server %s, %s\n", server.c_str(), git_version.c_str());
  }

  if (const int rc = seed(io, config.value(), opts.value()); rc != 0) {
    return rc;
  }

  const auto limit = std::chrono::seconds{120 + opts->pods / 100};
  std::printf("\ninitial sync of a fresh pod_informer (all namespaces), %ld repetitions\n",
              opts->reps);
  std::printf("%4s %10s %10s %10s %10s %12s %10s\n", "rep", "pods", "adds", "seconds", "pods/s",
              "RSS growth", "B/pod");
  for (long rep = 1; rep <= opts->reps; ++rep) {
    const auto s = measure_sync(config.value(), limit);
    if (!s) {
      return 1;
    }
    const double per_pod = s->store_size == 0 ? 0.0
                                              : static_cast<double>(s->rss_growth) /
                                                    static_cast<double>(s->store_size);
    std::printf("%4ld %10zu %10zu %10.3f %10.0f %9.1f MiB %10.0f\n", rep, s->store_size,
                s->handler_adds, s->seconds, static_cast<double>(s->store_size) / s->seconds,
                static_cast<double>(s->rss_growth) / (1024.0 * 1024.0), per_pod);
    std::fflush(stdout);
    if (s->store_size < static_cast<std::size_t>(opts->pods)) {
      std::fprintf(stderr, "warning: the store holds fewer pods than --pods\n");
    }
  }
  std::printf(
      "(RSS growth: VmRSS after has_synced() minus before the client was created, the "
      "store still alive; later repetitions reuse heap the previous one freed)\n");
  return 0;
}
