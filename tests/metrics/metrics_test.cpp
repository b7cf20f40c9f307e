#include "tec/metrics/metrics.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tec::metrics {
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

TEST(metrics, labelled_counter_children_sorted_by_labels) {
  registry r;
  auto& f = r.add_counter("api_requests_total", "API requests.", {"verb", "code"});
  EXPECT_EQ(r.render(), "") << "a labelled family without children renders nothing";
  f.with({"PUT", "200"}).inc();
  f.with({"GET", "404"}).inc(3);
  f.with({"GET", "200"}).inc(1e6);
  f.with({"GET", "200"}).inc();
  // prometheus-cpp writes label names in alphabetical order; children sorted by their labels.
  EXPECT_EQ(r.render(),
            "# HELP api_requests_total API requests.\n"
            "# TYPE api_requests_total counter\n"
            "api_requests_total{code=\"200\",verb=\"GET\"} 1000001\n"
            "api_requests_total{code=\"200\",verb=\"PUT\"} 1\n"
            "api_requests_total{code=\"404\",verb=\"GET\"} 3\n");
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
            "temperature{room=\"e\"} Nan\n"  // prometheus-cpp's spelling; Prometheus reads it
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
            "latency_seconds_count 5\n"
            "latency_seconds_sum 6.75\n"
            "latency_seconds_bucket{le=\"0.5\"} 2\n"
            "latency_seconds_bucket{le=\"1\"} 3\n"
            "latency_seconds_bucket{le=\"2.5\"} 4\n"
            "latency_seconds_bucket{le=\"+Inf\"} 5\n");
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
            "d_seconds_count{verb=\"GET\"} 1\n"
            "d_seconds_sum{verb=\"GET\"} 2\n"
            "d_seconds_bucket{verb=\"GET\",le=\"1\"} 0\n"
            "d_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 1\n");
}

TEST(metrics, histogram_value_equal_to_a_bound_falls_in_that_bucket) {
  const auto bounds = pod_deletion_duration_buckets();
  registry r;
  auto& h = r.add_histogram("edges_seconds", "Edges.", bounds).with({});
  for (const double b : bounds) {
    h.observe(b);
  }
  auto s = h.snapshot_for_test();
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
  s = above.snapshot_for_test();
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
  EXPECT_EQ(low.snapshot_for_test().counts[0], 3U);
}

TEST(metrics, histogram_without_bounds_has_only_inf) {
  registry r;
  r.add_histogram("h", "H.", {}).with({}).observe(4);
  EXPECT_EQ(r.render(),
            "# HELP h H.\n"
            "# TYPE h histogram\n"
            "h_count 1\n"
            "h_sum 4\n"
            "h_bucket{le=\"+Inf\"} 1\n");
}

TEST(metrics, label_value_escaping) {
  registry r;
  r.add_counter("esc_total", "Help with \"quotes\".", {"v"}).with({"a\"b\\c\nd"}).inc();
  EXPECT_EQ(r.render(),
            "# HELP esc_total Help with \"quotes\".\n"
            "# TYPE esc_total counter\n"
            "esc_total{v=\"a\\\"b\\\\c\\nd\"} 1\n");
}

// prometheus-cpp 1.0 writes HELP as it is: a line feed would break the exposition.
TEST(metrics, help_with_a_backslash_or_a_line_feed_throws) {
  registry r;
  EXPECT_THROW(r.add_counter("a_total", "two\nlines"), std::invalid_argument);
  EXPECT_THROW(r.add_gauge("b", "back\\slash"), std::invalid_argument);
  EXPECT_NO_THROW(r.add_gauge("c", "\"quotes\" are fine"));
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

TEST(metrics, the_shadow_families_exist_only_when_registered) {
  registry r;
  EXPECT_EQ(r.render().find("shadow"), std::string::npos);
  const auto m = register_shadow_metrics(r);
  m.decisions.with({"only_us"}).inc();
  m.agreement_delay.observe(0.3);
  m.pending.set(4);
  const std::string text = r.render();
  const std::string p = "taint_eviction_controller_";
  for (const std::string& line : {p + "shadow_decisions_total{outcome=\"agreed\"} 0\n",
                                  p + "shadow_decisions_total{outcome=\"cancelled_both\"} 0\n",
                                  p + "shadow_decisions_total{outcome=\"only_them\"} 0\n",
                                  p + "shadow_decisions_total{outcome=\"only_us\"} 1\n",
                                  p + "shadow_agreement_delay_seconds_bucket{le=\"0.01\"} 0\n",
                                  p + "shadow_agreement_delay_seconds_bucket{le=\"0.5\"} 1\n",
                                  p + "shadow_agreement_delay_seconds_bucket{le=\"60\"} 1\n",
                                  p + "shadow_pending 4\n", p + "shadow_settled_early_total 0\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
  }
  EXPECT_THROW(register_shadow_metrics(r), std::invalid_argument);
}

TEST(metrics, the_registry_s_own_families) {
  registry r;
  const auto m = register_standard_metrics(r, {"v1.2.3", "0123456789ab", "gcc 12.2.0"});
  m.eviction_wait_duration.observe(12);
  m.policy_reload_failures.inc();
  const std::string p = "taint_eviction_controller_";
  const auto text = r.render();
  EXPECT_NE(
      text.find(
          p + "build_info{commit=\"0123456789ab\",compiler=\"gcc 12.2.0\",version=\"v1.2.3\"} 1\n"),
      std::string::npos);
  EXPECT_NE(text.find(p + "policy_last_reload_successful 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find(p + "eviction_wait_duration_seconds_bucket{le=\"30\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find(p + "policy_reload_failures_total 1\n"), std::string::npos);
  // policy_info: one series, the policy in force; a change removes the old one.
  m.policy_info.with({"aaa"}).set(1);
  m.policy_info.keep_only({"bbb"});
  m.policy_info.with({"bbb"}).set(1);
  const auto info = r.render();
  EXPECT_EQ(info.find("sha256=\"aaa\""), std::string::npos) << info;
  EXPECT_NE(info.find(p + "policy_info{sha256=\"bbb\"} 1\n"), std::string::npos) << info;
  EXPECT_THROW(register_standard_metrics(r, {"again", "x", "y"}), std::invalid_argument);
}

TEST(metrics, a_published_table_is_read_at_each_render) {
  registry r;
  std::atomic<int> reads{0};
  double gauge_value = 2;
  std::vector<sample> events;
  table t;
  count deletions{t, "deletions_total", "Deletions."};
  t.push_back(gauge_row("stuck", "Stuck.", [&] {
    ++reads;
    return gauge_value;
  }));
  t.push_back(counter_row_by("result", "events_total", "Events.", [&] { return events; }));
  r.publish(t, "p_");
  EXPECT_EQ(reads.load(), 0);
  auto text = r.render();
  EXPECT_EQ(reads.load(), 1);
  EXPECT_NE(text.find("# HELP p_deletions_total Deletions.\n# TYPE p_deletions_total counter\n"
                      "p_deletions_total 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE p_stuck gauge\np_stuck 2\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("p_events_total"), std::string::npos) << "no children, no family";
  deletions.inc(7);
  gauge_value = 0;  // gauges go down
  events = {{"sent", 2}, {"dropped_full", 1}};
  text = r.render();
  EXPECT_EQ(reads.load(), 2);
  EXPECT_NE(text.find("p_deletions_total 7\n"), std::string::npos) << text;
  EXPECT_NE(text.find("p_stuck 0\n"), std::string::npos) << text;
  EXPECT_NE(
      text.find("p_events_total{result=\"dropped_full\"} 1\np_events_total{result=\"sent\"} 2\n"),
      std::string::npos)
      << text;
  EXPECT_EQ(read(t, "deletions_total"), 7);
  EXPECT_EQ(read(t, "events_total", "sent"), 2);
  EXPECT_EQ(read(t, "events_total", "other"), std::nullopt);
  EXPECT_EQ(read(t, "no_such_total"), std::nullopt);
}

// A total read lower than the last one exposed (two counts read one after the other) must not
// make a counter go down: Prometheus would take it for a restart and count a reset.
TEST(metrics, published_counters_never_go_down) {
  registry r;
  double retries = 5;
  std::vector<sample> failures = {{"timeout", 4}};
  r.publish({counter_row("retries_total", "Retries.", [&] { return retries; }),
             counter_row_by("reason", "failures_total", "Failures.", [&] { return failures; })},
            "");
  (void)r.render();
  retries = 3;
  failures = {{"timeout", 2}, {"forbidden", 1}};
  auto text = r.render();
  EXPECT_NE(text.find("retries_total 5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("failures_total{reason=\"timeout\"} 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("failures_total{reason=\"forbidden\"} 1\n"), std::string::npos);
  retries = 6;
  text = r.render();
  EXPECT_NE(text.find("retries_total 6\n"), std::string::npos) << text;
}

// A count two libraries share: one row declares it, the other adds to it.
TEST(metrics, rows_without_help_add_to_the_declared_family) {
  registry r;
  table first;
  count a{first, "shared_total", "Shared."};
  table second;
  count b{second, "shared_total", ""};
  EXPECT_THROW(r.publish(second, ""), std::invalid_argument) << "nothing declares it yet";
  r.publish(first, "");
  r.publish(second, "");
  a.inc(2);
  b.inc(3);
  const auto text = r.render();
  EXPECT_NE(text.find("# HELP shared_total Shared.\n# TYPE shared_total counter\nshared_total 5\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("shared_total", text.find("shared_total 5") + 1), std::string::npos)
      << "one family, one sample:\n"
      << text;
  // Of another kind or label: refused.
  EXPECT_THROW(r.publish({gauge_row("shared_total", "", [] { return 1.0; })}, ""),
               std::invalid_argument);
  EXPECT_THROW(
      r.publish({counter_row_by("l", "shared_total", "", [] { return std::vector<sample>{}; })},
                ""),
      std::invalid_argument);
}

TEST(metrics, invalid_published_rows_throw) {
  registry r;
  r.add_counter("taken_total", "Taken.");
  const auto one = [] { return 1.0; };
  EXPECT_THROW(r.publish({counter_row("taken_total", "Again.", one)}, ""), std::invalid_argument);
  EXPECT_THROW(r.publish({counter_row("a-b", "Dash.", one)}, ""), std::invalid_argument);
  EXPECT_THROW(r.publish({counter_row("x_total", "Two\nlines.", one)}, ""), std::invalid_argument);
  EXPECT_THROW(
      r.publish({counter_row("y_total", "Y.", one), counter_row("y_total", "Y.", one)}, ""),
      std::invalid_argument);
  EXPECT_THROW(
      r.publish({counter_row_by("a:b", "z_total", "Z.", [] { return std::vector<sample>{}; })}, ""),
      std::invalid_argument);
  EXPECT_THROW(r.publish({row{.name = "no_reader_total",
                              .help = "No reader.",
                              .kind = kind::counter,
                              .label = {},
                              .read = {}}},
                         ""),
               std::invalid_argument);
  // A rejected table adds nothing: its valid rows' names stay free.
  EXPECT_NO_THROW(r.publish({counter_row("y_total", "Y.", one)}, ""));
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
  const auto s = h.snapshot_for_test();
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
}  // namespace tec::metrics
