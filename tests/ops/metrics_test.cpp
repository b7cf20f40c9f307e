#include "tec/ops/metrics.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tec::ops {
namespace {

TEST(metrics, counter_text) {
  registry r;
  auto& c = r.add_counter("requests_total", "Requests served.").with({});
  EXPECT_EQ(r.render(),
            "# HELP requests_total Requests served.\n"
            "# TYPE requests_total counter\n"
            "requests_total 0\n");
  c.inc();
  c.inc(2.5);
  c.inc(-7);  // ignored: counters never go down
  c.inc(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(c.value(), 3.5);
  EXPECT_EQ(r.render(),
            "# HELP requests_total Requests served.\n"
            "# TYPE requests_total counter\n"
            "requests_total 3.5\n");
}

TEST(metrics, labelled_counter_children_sorted_by_label_values) {
  registry r;
  auto& f = r.add_counter("api_requests_total", "API requests.", {"verb", "code"});
  EXPECT_EQ(r.render(), "") << "a labelled family without children renders nothing";
  f.with({"PUT", "200"}).inc();
  f.with({"GET", "404"}).inc(3);
  f.with({"GET", "200"}).inc(1e6);
  f.with({"GET", "200"}).inc();
  EXPECT_EQ(r.render(),
            "# HELP api_requests_total API requests.\n"
            "# TYPE api_requests_total counter\n"
            "api_requests_total{verb=\"GET\",code=\"200\"} 1000001\n"
            "api_requests_total{verb=\"GET\",code=\"404\"} 3\n"
            "api_requests_total{verb=\"PUT\",code=\"200\"} 1\n");
}

TEST(metrics, with_returns_the_same_child_for_the_same_values) {
  registry r;
  auto& f = r.add_counter("x_total", "x", {"a"});
  const std::string dynamic = "value";
  EXPECT_EQ(&f.with({"value"}), &f.with({dynamic}));
  EXPECT_NE(&f.with({"value"}), &f.with({"other"}));
}

TEST(metrics, gauge_text_and_special_values) {
  registry r;
  auto& f = r.add_gauge("temperature", "Temperature.", {"room"});
  f.with({"b"}).set(-1.25);
  f.with({"a"}).inc(10);
  f.with({"a"}).dec(0.5);
  f.with({"c"}).set(std::numeric_limits<double>::infinity());
  f.with({"d"}).set(-std::numeric_limits<double>::infinity());
  f.with({"e"}).set(std::numeric_limits<double>::quiet_NaN());
  f.with({"f"}).set(1e-7);
  EXPECT_EQ(f.with({"a"}).value(), 9.5);
  EXPECT_EQ(r.render(),
            "# HELP temperature Temperature.\n"
            "# TYPE temperature gauge\n"
            "temperature{room=\"a\"} 9.5\n"
            "temperature{room=\"b\"} -1.25\n"
            "temperature{room=\"c\"} +Inf\n"
            "temperature{room=\"d\"} -Inf\n"
            "temperature{room=\"e\"} NaN\n"
            "temperature{room=\"f\"} 1e-07\n");
}

TEST(metrics, histogram_text) {
  registry r;
  auto& h = r.add_histogram("latency_seconds", "Latency.", {0.5, 1, 2.5}).with({});
  for (const double v : {0.25, 0.5, 1.0, 2.0, 3.0}) {
    h.observe(v);
  }
  h.observe(std::numeric_limits<double>::quiet_NaN());  // ignored
  EXPECT_EQ(r.render(),
            "# HELP latency_seconds Latency.\n"
            "# TYPE latency_seconds histogram\n"
            "latency_seconds_bucket{le=\"0.5\"} 2\n"
            "latency_seconds_bucket{le=\"1\"} 3\n"
            "latency_seconds_bucket{le=\"2.5\"} 4\n"
            "latency_seconds_bucket{le=\"+Inf\"} 5\n"
            "latency_seconds_sum 6.75\n"
            "latency_seconds_count 5\n");
}

TEST(metrics, labelled_histogram_text_and_trailing_inf_bound) {
  registry r;
  auto& f = r.add_histogram("d_seconds", "D.",
                            {1, std::numeric_limits<double>::infinity()},  // +Inf is implicit
                            {"verb"});
  f.with({"GET"}).observe(2);
  EXPECT_EQ(r.render(),
            "# HELP d_seconds D.\n"
            "# TYPE d_seconds histogram\n"
            "d_seconds_bucket{verb=\"GET\",le=\"1\"} 0\n"
            "d_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 1\n"
            "d_seconds_sum{verb=\"GET\"} 2\n"
            "d_seconds_count{verb=\"GET\"} 1\n");
}

TEST(metrics, histogram_value_equal_to_a_bound_falls_in_that_bucket) {
  const auto bounds = pod_deletion_duration_buckets();
  registry r;
  auto& h = r.add_histogram("edges_seconds", "Edges.", bounds).with({});
  for (const double b : bounds) {
    h.observe(b);
  }
  auto s = h.snapshot();
  ASSERT_EQ(s.counts.size(), bounds.size() + 1);
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    EXPECT_EQ(s.counts[i], 1U) << "le=" << bounds[i];
  }
  EXPECT_EQ(s.counts.back(), 0U);

  // Just above each bound: the next bucket (the last one: +Inf).
  registry r2;
  auto& above = r2.add_histogram("above_seconds", "Above.", bounds).with({});
  for (const double b : bounds) {
    above.observe(std::nextafter(b, std::numeric_limits<double>::infinity()));
  }
  s = above.snapshot();
  EXPECT_EQ(s.counts[0], 0U);
  for (std::size_t i = 1; i <= bounds.size(); ++i) {
    EXPECT_EQ(s.counts[i], 1U) << "bucket " << i;
  }

  // Below the first bound, zero and negative values: the first bucket.
  registry r3;
  auto& low = r3.add_histogram("low_seconds", "Low.", bounds).with({});
  low.observe(0);
  low.observe(-3);
  low.observe(std::nextafter(bounds[0], 0.0));
  EXPECT_EQ(low.snapshot().counts[0], 3U);
}

TEST(metrics, histogram_without_bounds_has_only_inf) {
  registry r;
  r.add_histogram("h", "H.", {}).with({}).observe(4);
  EXPECT_EQ(r.render(),
            "# HELP h H.\n"
            "# TYPE h histogram\n"
            "h_bucket{le=\"+Inf\"} 1\n"
            "h_sum 4\n"
            "h_count 1\n");
}

TEST(metrics, label_value_and_help_escaping) {
  registry r;
  r.add_counter("esc_total", "Help with \\ backslash,\nnewline and \"quotes\".", {"v"})
      .with({"a\"b\\c\nd"})
      .inc();
  EXPECT_EQ(r.render(),
            "# HELP esc_total Help with \\\\ backslash,\\nnewline and \"quotes\".\n"
            "# TYPE esc_total counter\n"
            "esc_total{v=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST(metrics, utf8_label_values_pass_through) {
  registry r;
  r.add_gauge("g", "G.", {"node"}).with({"nœud-ü"}).set(1);
  EXPECT_NE(r.render().find("g{node=\"nœud-ü\"} 1\n"), std::string::npos);
}

TEST(metrics, families_sorted_by_name) {
  registry r;
  r.add_gauge("b", "B.");
  r.add_counter("a_total", "A.");
  r.add_histogram("c", "C.", {1});
  const auto text = r.render();
  const auto a = text.find("# HELP a_total");
  const auto b = text.find("# HELP b ");
  const auto c = text.find("# HELP c ");
  ASSERT_NE(a, std::string::npos);
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
}

TEST(metrics, invalid_definitions_throw) {
  registry r;
  r.add_counter("ok_total", "ok", {"l"});
  EXPECT_THROW(r.add_counter("ok_total", "again"), std::invalid_argument);
  EXPECT_THROW(r.add_gauge("ok_total", "again, other type"), std::invalid_argument);
  EXPECT_THROW(r.add_counter("", "empty"), std::invalid_argument);
  EXPECT_THROW(r.add_counter("1abc", "leading digit"), std::invalid_argument);
  EXPECT_THROW(r.add_counter("a-b", "dash"), std::invalid_argument);
  EXPECT_NO_THROW(r.add_counter("ns:sub_total", "colons are fine in names"));
  EXPECT_THROW(r.add_counter("x1", "x", {"a:b"}), std::invalid_argument);
  EXPECT_THROW(r.add_counter("x2", "x", {"__reserved"}), std::invalid_argument);
  EXPECT_THROW(r.add_counter("x3", "x", {"a", "a"}), std::invalid_argument);
  EXPECT_THROW(r.add_histogram("x4", "x", {1}, {"le"}), std::invalid_argument);
  EXPECT_NO_THROW(r.add_counter("x5", "le is fine outside histograms", {"le"}));
  EXPECT_THROW(r.add_histogram("x6", "x", {2, 1}), std::invalid_argument);
  EXPECT_THROW(r.add_histogram("x7", "x", {1, 1}), std::invalid_argument);
  EXPECT_THROW(r.add_histogram("x8", "x", {std::numeric_limits<double>::quiet_NaN()}),
               std::invalid_argument);
  EXPECT_THROW(r.add_histogram("x9", "x", {-std::numeric_limits<double>::infinity(), 1}),
               std::invalid_argument);

  auto& f = r.add_counter("two_total", "two labels", {"a", "b"});
  EXPECT_THROW(f.with({"only-one"}), std::invalid_argument);
  EXPECT_THROW(f.with({"a", "b", "c"}), std::invalid_argument);
  EXPECT_THROW(f.with({}), std::invalid_argument);
}

TEST(metrics, standard_set) {
  registry r;
  const auto m = register_standard_metrics(r, "1.2.3");
  m.pod_deletions.inc();
  m.pod_deletion_duration.observe(0.005);
  m.pod_deletion_failures.with({"conflict"}).inc();
  m.api_requests.with({"DELETE", "200"}).inc();
  m.api_request_duration.with({"DELETE"}).observe(0.01);
  m.watch_restarts.with({"pods"}).inc();
  m.relists.with({"nodes"}).inc();
  m.events.with({"dropped_full"}).inc();
  m.tainted_nodes.set(3);
  m.is_leader.set(1);
  const auto text = r.render();
  for (const char* line : {
           "# TYPE taint_eviction_controller_pod_deletions_total counter\n",
           "taint_eviction_controller_pod_deletions_total 1\n",
           "# TYPE taint_eviction_controller_pod_deletion_duration_seconds histogram\n",
           "taint_eviction_controller_pod_deletion_duration_seconds_bucket{le=\"0.005\"} 1\n",
           "taint_eviction_controller_pod_deletion_duration_seconds_count 1\n",
           "taint_eviction_controller_scheduled_evictions_total 0\n",
           "taint_eviction_controller_cancelled_evictions_total 0\n",
           "taint_eviction_controller_pod_deletion_failures_total{reason=\"conflict\"} 1\n",
           "taint_eviction_controller_pod_deletion_retries_total 0\n",
           "# TYPE taint_eviction_controller_tainted_nodes gauge\n",
           "taint_eviction_controller_tainted_nodes 3\n",
           "taint_eviction_controller_watch_restarts_total{resource=\"pods\"} 1\n",
           "taint_eviction_controller_relists_total{resource=\"nodes\"} 1\n",
           "taint_eviction_controller_api_requests_total{verb=\"DELETE\",code=\"200\"} 1\n",
           "taint_eviction_controller_api_request_duration_seconds_bucket{verb=\"DELETE\","
           "le=\"0.025\"} 1\n",
           "# TYPE taint_eviction_controller_events_total counter\n",
           "taint_eviction_controller_events_total{result=\"dropped_full\"} 1\n",
           "taint_eviction_controller_is_leader 1\n",
           "# TYPE taint_eviction_controller_build_info gauge\n",
           "taint_eviction_controller_build_info{version=\"1.2.3\"} 1\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "in:\n" << text;
  }
  // Upstream's buckets, in order, then +Inf.
  std::string les;
  const std::string prefix = "taint_eviction_controller_pod_deletion_duration_seconds_bucket{le=\"";
  for (auto pos = text.find(prefix); pos != std::string::npos; pos = text.find(prefix, pos + 1)) {
    const auto start = pos + prefix.size();
    les += text.substr(start, text.find('"', start) - start) + " ";
  }
  EXPECT_EQ(les, "0.005 0.025 0.1 0.5 1 2.5 10 30 60 120 180 240 +Inf ");

  EXPECT_THROW(register_standard_metrics(r, "again"), std::invalid_argument);
}

// Run under TSan: updates, first-time child creation and scrapes from several threads.
TEST(metrics, concurrent_updates_and_scrapes) {
  registry r;
  auto& c = r.add_counter("c_total", "c").with({});
  auto& g = r.add_gauge("g", "g").with({});
  auto& h = r.add_histogram("h", "h", {1, 2}).with({});
  auto& lf = r.add_counter("l_total", "l", {"k"});
  constexpr int threads = 4;
  constexpr int iterations = 20000;
  std::atomic<bool> stop{false};
  std::thread scraper([&] {
    while (!stop.load()) {
      const auto text = r.render();
      ASSERT_NE(text.find("# TYPE c_total counter"), std::string::npos);
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < iterations; ++i) {
        c.inc();
        g.inc();
        g.dec(0.5);
        h.observe(i % 3 == 0 ? 0.5 : (i % 3 == 1 ? 1.5 : 5));
        lf.with({std::to_string(i % 50)}).inc();
        if (i % 1000 == 0) {
          r.add_gauge("late_" + std::to_string(t) + "_" + std::to_string(i), "late").with({});
        }
      }
    });
  }
  for (auto& w : workers) {
    w.join();
  }
  stop = true;
  scraper.join();

  constexpr double total = double{threads} * iterations;
  EXPECT_EQ(c.value(), total);
  EXPECT_EQ(g.value(), total / 2);
  const auto s = h.snapshot();
  EXPECT_EQ(s.count, static_cast<std::uint64_t>(total));
  std::uint64_t per_bucket = 0;
  for (int i = 0; i < iterations; ++i) {
    per_bucket += (i % 3 == 0) ? std::uint64_t{1} : std::uint64_t{0};
  }
  EXPECT_EQ(s.counts[0], per_bucket * threads);
  double label_total = 0;
  for (int k = 0; k < 50; ++k) {
    label_total += lf.with({std::to_string(k)}).value();
  }
  EXPECT_EQ(label_total, total);
  EXPECT_NE(r.render().find("h_count 80000\n"), std::string::npos);
}

}  // namespace
}  // namespace tec::ops
