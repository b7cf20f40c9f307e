// The daemon's scrape-time metrics: collect_stats() maps the libraries' own totals, and a scrape
// while a threaded controller works is race-free (run under TSan) with counters that never go
// down from one scrape to the next.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "controller/support/fakes.hpp"
#include "stats_collector.hpp"
#include "tec/controller/controller.hpp"
#include "tec/k8sclient/reflector.hpp"
#include "tec/metrics/metrics.hpp"
#include "tec/writers/event_recorder.hpp"
#include "tec/writers/eviction_sink.hpp"

namespace tec::cmd {
namespace {

using namespace std::chrono_literals;
using Map = std::map<std::string, std::uint64_t>;
using writers::event_recorder_stats;
using writers::eviction_sink_stats;

TEST(collect_stats, maps_every_library_total) {
  controller::controller_stats cs;
  cs.evictions_scheduled = 11;
  cs.cancellations = 12;
  cs.evictions_started = 13;
  cs.eviction_attempts = 20;
  cs.tainted_nodes = 3;
  cs.stuck_evictions = 2;
  cs.queue.held = 8;
  cs.breaker_open = true;
  cs.dry_run_deletions = 30;
  cs.terminating_skipped = 40;
  eviction_sink_stats ss;
  ss.dry_run_deletions = 1;
  ss.deletions = 9;
  ss.failures_by_reason = {{"forbidden", 4}};
  ss.condition_failures_by_reason = {{"invalid", 1}};
  k8sclient::reflector_stats pods;
  pods.watch_restarts = 5;
  pods.relists = 6;
  pods.decode_errors = 7;
  pods.backoffs = 8;
  k8sclient::reflector_stats nodes;
  nodes.watch_restarts = 15;
  nodes.relists = 16;
  nodes.decode_errors = 17;
  nodes.backoffs = 18;
  event_recorder_stats es;
  es.sent = 1;
  es.updated = 2;
  es.aggregated = 3;
  es.failed = 4;
  es.dropped_spam = 5;
  es.dropped_full = 6;
  es.dropped_stopped = 7;

  const auto s = collect_stats(cs, ss, pods, nodes, es);
  EXPECT_EQ(s.pod_deletions, 9U);
  EXPECT_EQ(s.scheduled_evictions, 11U);
  EXPECT_EQ(s.cancelled_evictions, 12U);
  EXPECT_EQ(s.pod_deletion_retries, 7U) << "attempts after the first";
  EXPECT_EQ(s.pod_deletion_failures, (Map{{"forbidden", 4}}));
  EXPECT_EQ(s.disruption_condition_failures, (Map{{"invalid", 1}}));
  EXPECT_EQ(s.tainted_nodes, 3U);
  EXPECT_EQ(s.stuck_evictions, 2U);
  EXPECT_EQ(s.waiting_evictions, 8U);
  EXPECT_EQ(s.storm_breaker_open, 1U);
  EXPECT_EQ(s.dry_run_pod_deletions, 31U);
  EXPECT_EQ(s.terminating_pods_skipped, 40U);
  EXPECT_EQ(s.watch_restarts, (Map{{"pods", 5}, {"nodes", 15}}));
  EXPECT_EQ(s.relists, (Map{{"pods", 6}, {"nodes", 16}}));
  EXPECT_EQ(s.watch_decode_errors, (Map{{"pods", 7}, {"nodes", 17}}));
  EXPECT_EQ(s.list_watch_backoffs, (Map{{"pods", 8}, {"nodes", 18}}));
  EXPECT_EQ(s.events, (Map{{"sent", 1},
                           {"updated", 2},
                           {"aggregated", 3},
                           {"failed", 4},
                           {"dropped_spam", 5},
                           {"dropped_full", 6},
                           {"dropped_stopped", 7}}));

  // Attempts read before they caught up with first attempts: no wrap-around.
  cs.eviction_attempts = 12;
  EXPECT_EQ(collect_stats(cs, ss, pods, nodes, es).pod_deletion_retries, 0U);
}

// The value of an unlabelled sample `name` in an exposition, or -1.
double sample(const std::string& text, const std::string& name) {
  const auto pos = text.find("\n" + name + " ");
  if (pos == std::string::npos) {
    return -1;
  }
  return std::stod(text.substr(pos + name.size() + 2));
}

// Run under TSan: scrapes on their own thread read the controller's stats while its workers,
// its timed queue and several feeders change them.
TEST(collect_stats, scraping_while_the_controller_works_is_race_free_and_monotonic) {
  using controller::testing::make_node;
  using controller::testing::make_pod;
  using controller::testing::make_taint;
  controller::testing::thread_driver drv;
  controller::testing::fake_index index;
  controller::testing::recording_sink sink(&index);
  controller::controller ctl(index, sink, drv, controller::testing::threaded_options(4));
  metrics::registry registry;
  const auto metrics = metrics::register_standard_metrics(
      registry, {"test", "c", "cc"}, [&ctl] { return collect_stats(ctl.stats(), {}, {}, {}, {}); });
  ctl.start();

  const std::string p = "taint_eviction_controller_";
  const std::vector<std::string> counters = {p + "scheduled_evictions_total",
                                             p + "cancelled_evictions_total",
                                             p + "pod_deletion_retries_total"};
  std::atomic<bool> done{false};
  std::atomic<int> scrapes{0};
  std::thread scraper([&] {
    std::vector<double> last(counters.size(), 0);
    while (!done.load() || scrapes.load() < 2) {
      const auto text = registry.render();
      for (std::size_t i = 0; i < counters.size(); ++i) {
        const double v = sample(text, counters[i]);
        ASSERT_GE(v, last[i]) << counters[i] << " went down";
        last[i] = v;
      }
      ++scrapes;
    }
  });

  constexpr int node_count = 4;
  std::vector<controller::node_view> nodes;
  for (int i = 0; i < node_count; ++i) {
    nodes.push_back(make_node("node-" + std::to_string(i)));
    ctl.node_updated(nullptr, &nodes.back());
  }
  std::vector<std::thread> feeders;
  for (int f = 0; f < 3; ++f) {
    feeders.emplace_back([&, f] {
      for (int i = 0; i < 40; ++i) {
        const auto pod = make_pod("pod-" + std::to_string(f) + "-" + std::to_string(i),
                                  "node-" + std::to_string(i % node_count));
        index.put(pod);
        ctl.pod_updated(nullptr, &pod);
      }
    });
  }
  feeders.emplace_back([&] {
    for (int round = 0; round < 20; ++round) {
      for (auto& n : nodes) {
        auto next = n;
        next.taints = round % 2 == 0 ? std::vector<controller::taint>{make_taint(1)}
                                     : std::vector<controller::taint>{};
        ctl.node_updated(&n, &next);
        n = next;
      }
    }
  });
  for (auto& t : feeders) {
    t.join();
  }
  // The last round removed the taints: nothing is pending. Then new pods, every node tainted
  // and the new pods' first 40 attempts failing: every pod is evicted, after 40 retries.
  ASSERT_TRUE(ctl.wait_idle(60s));
  // wait_idle covers the updates, not the evictions they started: a run cancelled by the last
  // untaint may still be on its way to the sink (and a cancelled run is not retried), so the
  // failures go to the new pods only.
  sink.script(std::vector<controller::eviction_status>(40, controller::eviction_status::failed),
              [](const controller::pod_ref& pod) { return pod.name.starts_with("late-"); });
  for (int i = 0; i < 20; ++i) {
    const auto pod =
        make_pod("late-" + std::to_string(i), "node-" + std::to_string(i % node_count));
    index.put(pod);
    ctl.pod_updated(nullptr, &pod);
  }
  for (auto& n : nodes) {
    auto next = n;
    next.taints = {make_taint(1)};
    ctl.node_updated(&n, &next);
    n = next;
  }
  ASSERT_TRUE(ctl.wait_idle(60s));
  ASSERT_TRUE(sink.wait_until([&] { return index.all().empty(); }, 60s));
  done = true;
  scraper.join();
  const auto text = registry.render();
  const auto cs = ctl.stats();
  EXPECT_EQ(sample(text, counters[0]), static_cast<double>(cs.evictions_scheduled)) << text;
  EXPECT_EQ(sample(text, counters[2]),
            static_cast<double>(cs.eviction_attempts - cs.evictions_started));
  EXPECT_GE(sample(text, counters[2]), 40) << "every scripted failure was retried";
  EXPECT_EQ(sample(text, p + "tainted_nodes"), node_count);
  EXPECT_GE(scrapes.load(), 2);
  (void)metrics;
  ctl.shutdown();
}

TEST(NamespaceStats, TheInformerCountsJoinTheMetricsFamilies) {
  metrics::scrape_stats s;
  s.watch_restarts = {{"pods", 1}};
  k8sclient::reflector_stats ns;
  ns.watch_restarts = 2;
  ns.relists = 3;
  ns.decode_errors = 4;
  add_informer_stats(s, "namespaces", ns);
  EXPECT_EQ(s.watch_restarts,
            (std::map<std::string, std::uint64_t>{{"pods", 1}, {"namespaces", 2}}));
  EXPECT_EQ(s.relists.at("namespaces"), 3U);
  EXPECT_EQ(s.watch_decode_errors.at("namespaces"), 4U);
}

}  // namespace
}  // namespace tec::cmd
