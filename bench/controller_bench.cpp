// Decisions per second through the sharded controller pipeline (real worker threads, a
// real-time driver thread for the timed queue, a no-op sink that completes at once).
//
//   BM_TaintAllNodes/<workers>: 5,000 nodes x 30 pods, every node tainted at once; half the
//     pods do not tolerate the taint (evicted now: the clock stops when the sink has seen all
//     75,000), half tolerate it for 300 s (scheduled). 150,000 decisions per iteration.
//   BM_Churn/<workers>: 1,000 nodes x 30 pods, half the nodes tainted; 100,000 updates from
//     one informer thread: 70% pod updates (toleration changes and re-creates with a new
//     UID), 30% node taint toggles. The clock stops when every update has been handled.
//   BM_Decide: the pure matching + minimum-time computation for one pod.

#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tec/controller/controller.hpp"

namespace {

using namespace tec::controller;
namespace tq = tec::timedqueue;

// What the controller counts now, by the name it publishes (0 when it publishes no such name).
std::uint64_t counted(const controller& c, std::string_view metric) {
  return static_cast<std::uint64_t>(tec::metrics::read(c.metric_table(), metric).value_or(0));
}

// Real time, one thread for posted work and the timer.
class bench_driver final : public tq::driver {
public:
  bench_driver() : thread_([this] { loop(); }) {}
  ~bench_driver() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  bench_driver(const bench_driver&) = delete;
  bench_driver& operator=(const bench_driver&) = delete;

  [[nodiscard]] tq::time_point now() const override { return tq::clock_type::now(); }
  void arm(tq::time_point deadline, std::function<void()> on_due) override {
    {
      std::lock_guard lock(mu_);
      deadline_ = deadline;
      on_due_ = std::move(on_due);
    }
    cv_.notify_all();
  }
  void disarm() override {
    std::lock_guard lock(mu_);
    deadline_.reset();
    on_due_ = nullptr;
  }
  void post(std::function<void()> fn) override {
    {
      std::lock_guard lock(mu_);
      posted_.push_back(std::move(fn));
    }
    cv_.notify_all();
  }

private:
  void loop() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      if (!posted_.empty()) {
        auto fn = std::move(posted_.front());
        posted_.pop_front();
        lock.unlock();
        fn();
        lock.lock();
      } else if (deadline_ && tq::clock_type::now() >= *deadline_) {
        auto fn = std::exchange(on_due_, nullptr);
        deadline_.reset();
        lock.unlock();
        if (fn) {
          fn();
        }
        lock.lock();
      } else if (deadline_) {
        cv_.wait_until(lock, *deadline_);
      } else {
        cv_.wait(lock);
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::deque<std::function<void()>> posted_;
  std::optional<tq::time_point> deadline_;
  std::function<void()> on_due_;
  std::thread thread_;
};

// A pod cache with a by-node index, like the informer's. Thread-safe (shared lock).
class bench_index final : public pod_index {
public:
  void put(const pod_view& p) {
    std::unique_lock lock(mu_);
    const std::string key = p.namespace_ + "/" + p.name;
    const auto it = by_key_.find(key);
    if (it != by_key_.end()) {
      by_node_[it->second.node_name].erase(key);
    }
    by_key_.insert_or_assign(key, p);
    by_node_[p.node_name].insert_or_assign(key, p);
  }
  [[nodiscard]] std::vector<pod_view> pods_on_node(std::string_view node) const override {
    std::shared_lock lock(mu_);
    std::vector<pod_view> out;
    const auto it = by_node_.find(std::string(node));
    if (it != by_node_.end()) {
      out.reserve(it->second.size());
      for (const auto& [key, p] : it->second) {
        out.push_back(p);
      }
    }
    return out;
  }
  [[nodiscard]] std::optional<pod_view> get_pod(std::string_view ns,
                                                std::string_view name) const override {
    std::string key(ns);
    key.push_back('/');
    key.append(name);
    std::shared_lock lock(mu_);
    const auto it = by_key_.find(key);
    if (it == by_key_.end()) {
      return std::nullopt;
    }
    return it->second;
  }

private:
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, pod_view> by_key_;
  std::unordered_map<std::string, std::unordered_map<std::string, pod_view>> by_node_;
};

class noop_sink final : public eviction_sink {
public:
  void evict(eviction_request /*request*/, std::function<void(eviction_result)> done) override {
    done(eviction_result{});
    if (evicted_.fetch_add(1) + 1 == target_.load()) {
      std::lock_guard lock(mu_);
      cv_.notify_all();
    }
  }
  void record_event(const pod_ref& /*pod*/, event_kind /*kind*/,
                    std::string_view /*detail*/) override {}

  void expect(std::uint64_t n) { target_ = n; }
  bool wait(std::chrono::seconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return evicted_.load() >= target_.load(); });
  }

private:
  std::atomic<std::uint64_t> evicted_{0};
  std::atomic<std::uint64_t> target_{0};
  std::mutex mu_;
  std::condition_variable cv_;
};

taint bench_taint() {
  return taint{"node.kubernetes.io/unreachable", "", taint_effect::no_execute, 0};
}

std::vector<toleration> default_tolerations(bool tolerate_unreachable) {
  // What DefaultTolerationSeconds adds (not-ready and unreachable, 300 s); the "untolerated"
  // pods carry an unrelated toleration instead of the unreachable one.
  std::vector<toleration> tols;
  toleration not_ready{"node.kubernetes.io/not-ready", toleration_operator::exists, "",
                       taint_effect::no_execute, 300};
  tols.push_back(not_ready);
  if (tolerate_unreachable) {
    toleration unreachable{"node.kubernetes.io/unreachable", toleration_operator::exists, "",
                           taint_effect::no_execute, 300};
    tols.push_back(unreachable);
  }
  return tols;
}

pod_view bench_pod(int node, int i, std::uint64_t uid, bool tolerate) {
  pod_view p;
  p.namespace_ = "ns-" + std::to_string(node % 50);
  p.name = "pod-" + std::to_string(node) + "-" + std::to_string(i);
  p.uid = "uid-" + std::to_string(uid);
  p.node_name = "node-" + std::to_string(node);
  p.tolerations = default_tolerations(tolerate);
  p.phase = pod_phase::running;
  return p;
}

// CPU time of the whole process (all threads): on a shared, loaded machine this is the
// figure that says whether the work fits in the wall-clock budget of an idle 2-core one.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

controller_options bench_options(std::size_t workers) {
  controller_options o;
  o.workers = workers;
  o.threaded = true;
  return o;
}

constexpr int nodes_all = 5000;
constexpr int pods_per_node = 30;

const bench_index& all_nodes_index() {
  static const std::unique_ptr<bench_index> index = [] {
    auto idx = std::make_unique<bench_index>();
    std::uint64_t uid = 0;
    for (int n = 0; n < nodes_all; ++n) {
      for (int i = 0; i < pods_per_node; ++i) {
        idx->put(bench_pod(n, i, ++uid, i % 2 == 1));
      }
    }
    return idx;
  }();
  return *index;
}

void BM_TaintAllNodes(benchmark::State& state) {
  spdlog::set_level(spdlog::level::off);
  const auto workers = static_cast<std::size_t>(state.range(0));
  const bench_index& index = all_nodes_index();
  std::vector<node_view> before;
  std::vector<node_view> after;
  for (int n = 0; n < nodes_all; ++n) {
    node_view v;
    v.name = "node-" + std::to_string(n);
    before.push_back(v);
    v.taints.push_back(bench_taint());
    after.push_back(v);
  }
  double to_idle = 0;
  double cpu = 0;
  for (auto _ : state) {
    bench_driver drv;
    noop_sink sink;
    sink.expect(static_cast<std::uint64_t>(nodes_all) * pods_per_node / 2);
    controller ctl(index, sink, drv, bench_options(workers));
    ctl.start();
    const double cpu_start = process_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    for (int n = 0; n < nodes_all; ++n) {
      ctl.node_updated(&before[static_cast<std::size_t>(n)], &after[static_cast<std::size_t>(n)]);
    }
    if (!ctl.wait_idle(std::chrono::milliseconds(60'000))) {
      state.SkipWithError("controller did not go idle");
      break;
    }
    const auto idle = std::chrono::steady_clock::now();
    if (!sink.wait(std::chrono::seconds(60))) {
      state.SkipWithError("evictions did not all run");
      break;
    }
    const auto end = std::chrono::steady_clock::now();
    cpu += process_cpu_seconds() - cpu_start;
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    to_idle += std::chrono::duration<double>(idle - start).count();
    if (counted(ctl, "scheduled_evictions_total") !=
        static_cast<std::uint64_t>(nodes_all) * pods_per_node) {
      state.SkipWithError("wrong number of decisions");
      break;
    }
    ctl.shutdown();
  }
  const double decisions = static_cast<double>(nodes_all) * pods_per_node;
  state.counters["decisions"] = decisions;
  state.counters["decisions_per_s"] = benchmark::Counter(
      decisions * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  const auto iterations =
      static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  state.counters["decided_s"] = to_idle / iterations;
  state.counters["cpu_s"] = cpu / iterations;
}
BENCHMARK(BM_TaintAllNodes)
    ->Arg(8)
    ->Arg(2)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

void BM_Churn(benchmark::State& state) {
  spdlog::set_level(spdlog::level::off);
  const auto workers = static_cast<std::size_t>(state.range(0));
  constexpr int nodes = 1000;
  constexpr int updates = 100'000;
  double churn_cpu = 0;
  std::uint64_t decisions = 0;
  for (auto _ : state) {
    state.PauseTiming();
    bench_index index;
    std::uint64_t uid = 0;
    std::vector<node_view> node_state;
    std::vector<pod_view> pods;
    for (int n = 0; n < nodes; ++n) {
      node_view v;
      v.name = "node-" + std::to_string(n);
      if (n % 2 == 0) {
        v.taints.push_back(bench_taint());
      }
      node_state.push_back(v);
      for (int i = 0; i < pods_per_node; ++i) {
        pods.push_back(bench_pod(n, i, ++uid, i % 2 == 1));
        index.put(pods.back());
      }
    }
    bench_driver drv;
    noop_sink sink;
    controller ctl(index, sink, drv, bench_options(workers));
    ctl.start();
    for (const auto& v : node_state) {
      ctl.node_updated(nullptr, &v);
    }
    ctl.wait_idle(std::chrono::milliseconds(60'000));
    std::mt19937 rng(42);
    const std::uint64_t decisions_before = counted(ctl, "pod_decisions_total");
    state.ResumeTiming();
    const double cpu_start = process_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    for (int u = 0; u < updates; ++u) {
      const auto r = rng() % 10;
      if (r < 3) {
        node_view& v = node_state[rng() % nodes];
        node_view next = v;
        if (next.taints.empty()) {
          next.taints.push_back(bench_taint());
        } else {
          next.taints.clear();
        }
        ctl.node_updated(&v, &next);
        v = std::move(next);
      } else {
        pod_view& p = pods[rng() % pods.size()];
        pod_view next = p;
        if (r < 6) {
          next.tolerations = default_tolerations(next.tolerations.size() == 1);
        } else {
          next.uid = "uid-" + std::to_string(++uid);  // Re-created (deletion coalesced).
        }
        index.put(next);
        ctl.pod_updated(&p, &next);
        p = std::move(next);
      }
    }
    if (!ctl.wait_idle(std::chrono::milliseconds(60'000))) {
      state.SkipWithError("controller did not go idle");
      break;
    }
    const auto end = std::chrono::steady_clock::now();
    churn_cpu += process_cpu_seconds() - cpu_start;
    decisions += counted(ctl, "pod_decisions_total") - decisions_before;
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    state.PauseTiming();
    ctl.shutdown();
    state.ResumeTiming();
  }
  const auto iterations =
      static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  state.counters["cpu_s"] = churn_cpu / iterations;
  state.counters["pod_decisions"] = static_cast<double>(decisions) / iterations;
  state.counters["updates_per_s"] =
      benchmark::Counter(static_cast<double>(updates) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Churn)->Arg(8)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_Decide(benchmark::State& state) {
  const std::vector<taint> taints{bench_taint()};
  const std::vector<toleration> tols = default_tolerations(true);
  for (auto _ : state) {
    benchmark::DoNotOptimize(decide(taints, tols, {}));
  }
}
BENCHMARK(BM_Decide);

}  // namespace

BENCHMARK_MAIN();
