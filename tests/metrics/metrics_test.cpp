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

// What a scrape shows of one family.
struct family_shape {
  std::string type;
  std::string help;
  std::string labels;   // label names of the samples, sorted, comma-separated ("le" left out)
  std::string buckets;  // histograms: the le values of the first child, in order
  bool operator==(const family_shape&) const = default;
};

std::ostream& operator<<(std::ostream& os, const family_shape& f) {
  return os << "{" << f.type << ", \"" << f.help << "\", {" << f.labels << "}, [" << f.buckets
            << "]}";
}

// Reads the text exposition back into family name -> shape (enough of the format for ours).
std::map<std::string, family_shape> parse_exposition(const std::string& text) {
  std::map<std::string, family_shape> out;
  std::map<std::string, std::set<std::string>> label_names;
  std::map<std::string, std::string> first_child;  // histogram -> labels of its first bucket
  std::istringstream in(text);
  std::string line;
  std::string current;
  while (std::getline(in, line)) {
    if (line.starts_with("# HELP ")) {
      const auto rest = line.substr(7);
      current = rest.substr(0, rest.find(' '));
      out[current].help = rest.substr(current.size() + 1);
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      const auto rest = line.substr(7);
      current = rest.substr(0, rest.find(' '));
      out[current].type = rest.substr(current.size() + 1);
      continue;
    }
    EXPECT_TRUE(!current.empty() && line.starts_with(current)) << line;
    const auto brace = line.find('{');
    const auto name_end = std::min(brace, line.find(' '));
    const std::string sample = line.substr(0, name_end);
    if (brace == std::string::npos || brace > line.find(' ')) {
      continue;
    }
    const std::string labels = line.substr(brace + 1, line.find('}') - brace - 1);
    std::string without_le;
    for (std::size_t pos = 0; pos < labels.size();) {
      const auto eq = labels.find('=', pos);
      const auto close = labels.find('"', eq + 2);
      const std::string name = labels.substr(pos, eq - pos);
      const std::string value = labels.substr(eq + 2, close - eq - 2);
      if (name == "le" && sample == current + "_bucket") {
        if (!first_child.contains(current)) {
          first_child[current] = without_le;
        }
        if (first_child[current] == without_le) {
          out[current].buckets += (out[current].buckets.empty() ? "" : " ") + value;
        }
      } else {
        label_names[current].insert(name);
        without_le += name + "=" + value + ",";
      }
      pos = close + 2;
    }
  }
  for (auto& [name, names] : label_names) {
    for (const auto& l : names) {
      out[name].labels += (out[name].labels.empty() ? "" : ",") + l;
    }
  }
  return out;
}

scrape_stats every_series() {
  scrape_stats s;
  s.pod_deletions = 1;
  s.pod_deletion_failures = {{"forbidden", 1}};
  s.disruption_condition_failures = {{"forbidden", 1}};
  s.fresh_node_checks = {{"taint_gone", 1}};
  s.watch_restarts = {{"pods", 1}, {"nodes", 0}};
  s.relists = {{"pods", 0}};
  s.list_watch_backoffs = {{"nodes", 3}};
  s.watch_decode_errors = {{"nodes", 0}};
  s.events = {{"sent", 1}};
  s.tainted_nodes = 2;
  s.waiting_evictions = 4;
  s.storm_breaker_open = 1;
  s.dry_run_pod_deletions = 5;
  s.deadlines_from_taint_time = 6;
  s.pods_skipped = {{"pod_selector", 7}};
  s.toleration_overrides = 8;
  s.pod_evictions = 9;
  s.eviction_refusals = 10;
  s.evictions_blocked = 11;
  s.eviction_fallbacks = 12;
  s.terminating_pods_skipped = 13;
  return s;
}

// README "What to look at" lists these: a rename, a new label, other buckets or another help
// text must be deliberate (change the README and this list together).
TEST(metrics, the_standard_set_is_the_documented_one) {
  const std::string p = "taint_eviction_controller_";
  const std::string deletion_buckets = "0.005 0.025 0.1 0.5 1 2.5 10 30 60 120 180 240 +Inf";
  const std::map<std::string, family_shape> golden = {
      {p + "pod_deletions_total",
       {"counter", "Pods deleted by the taint eviction controller.", "", ""}},
      {p + "pod_deletion_duration_seconds",
       {"histogram", "Seconds from when a pod's eviction became due to its deletion.", "",
        deletion_buckets}},
      {p + "scheduled_evictions_total", {"counter", "Pod evictions scheduled.", "", ""}},
      {p + "cancelled_evictions_total",
       {"counter", "Scheduled pod evictions cancelled before they ran.", "", ""}},
      {p + "pod_deletion_failures_total",
       {"counter", "Failed pod deletion attempts, by reason.", "reason", ""}},
      {p + "pod_deletion_retries_total", {"counter", "Pod deletion attempts retried.", "", ""}},
      {p + "tainted_nodes", {"gauge", "Nodes that carry at least one NoExecute taint.", "", ""}},
      {p + "watch_restarts_total", {"counter", "Watches restarted, by resource.", "resource", ""}},
      {p + "relists_total", {"counter", "Full re-LISTs, by resource.", "resource", ""}},
      {p + "list_watch_backoffs_total",
       {"counter",
        "LIST and WATCH restarts that waited for the backoff (410 Gone, failures), by resource.",
        "resource", ""}},
      {p + "api_requests_total",
       {"counter", "Kubernetes API requests, by verb and HTTP status code.", "code,verb", ""}},
      {p + "api_request_duration_seconds",
       {"histogram", "Kubernetes API request latency in seconds, by verb.", "verb",
        "0.005 0.025 0.1 0.25 0.5 1 2 4 8 15 30 60 +Inf"}},
      {p + "events_total",
       {"counter",
        "Pod events (TaintManagerEviction, TaintEvictionFailed), by what became of them.", "result",
        ""}},
      {p + "stuck_evictions",
       {"gauge", "Evictions that failed at least 5 times in a row and are still retried.", "", ""}},
      {p + "disruption_condition_failures_total",
       {"counter",
        "DisruptionTarget condition patches that failed permanently (the DELETE went ahead "
        "without the condition), by reason.",
        "reason", ""}},
      {p + "watch_decode_errors_total",
       {"counter",
        "Objects in watch events or LIST pages that could not be decoded and were skipped, by "
        "resource.",
        "resource", ""}},
      {p + "is_leader",
       {"gauge", "1 while this process holds the leader election lease, else 0.", "", ""}},
      {p + "evictions_waiting",
       {"gauge",
        "Due evictions the eviction policy holds back (rate limit, in-flight caps, storm "
        "breaker).",
        "", ""}},
      {p + "held_evictions",
       {"gauge", "Due evictions waiting for a taint-eviction-controller/hold-until annotation.", "",
        ""}},
      {p + "settling_evictions",
       {"gauge", "Due evictions waiting for the storm breaker's settling time (settleSeconds).", "",
        ""}},
      {p + "storm_breaker_open",
       {"gauge", "1 while the storm breaker is open and every eviction waits, else 0.", "", ""}},
      {p + "dry_run_pod_deletions_total",
       {"counter", "Pods the controller would have deleted, had dry-run been off.", "", ""}},
      {p + "deadlines_from_taint_time_total",
       {"counter",
        "Evictions scheduled when this process started acting whose countdown was counted from "
        "the taint's timeAdded (or the pod's bind time) rather than from now.",
        "", ""}},
      {p + "pods_skipped_total",
       {"counter",
        "Decisions that left a pod on a tainted node alone for a scoping rule of the policy or "
        "the opt-out annotation, by reason.",
        "reason", ""}},
      {p + "toleration_overrides_total",
       {"counter",
        "Evictions scheduled with a time a taint rule's minTolerationSeconds or "
        "maxTolerationSeconds set instead of the pod's own toleration.",
        "", ""}},
      {p + "terminating_pods_skipped_total",
       {"counter",
        "Evictions not made because the pod was already terminating (a deletionTimestamp): no "
        "DELETE, no rate-limit token, no Marking event.",
        "", ""}},
      {p + "pod_evictions_total",
       {"counter",
        "Pods evicted through the Eviction API (evictionMode Evict); each is also in "
        "pod_deletions_total.",
        "", ""}},
      {p + "eviction_refusals_total",
       {"counter", "Eviction API calls refused (429: a PodDisruptionBudget) and retried.", "", ""}},
      {p + "evictions_blocked",
       {"gauge",
        "Evictions the Eviction API refuses right now (a PodDisruptionBudget), still retried.", "",
        ""}},
      {p + "eviction_fallbacks_total",
       {"counter", "Pods deleted after their eviction was refused for fallbackAfter.", "", ""}},
      {p + "eviction_wait_duration_seconds",
       {"histogram",
        "Seconds an eviction the eviction policy held back waited from when it was due to when "
        "it started.",
        "", "0.1 0.5 1 5 10 30 60 120 300 600 1800 3600 +Inf"}},
      {p + "policy_reload_failures_total",
       {"counter",
        "Policy file changes rejected (invalid, unreadable or missing); the policy in force "
        "stayed.",
        "", ""}},
      {p + "policy_last_reload_successful",
       {"gauge",
        "1 when the last load or reload of the policy file succeeded (or there is no --policy), 0 "
        "when it was rejected and the previous policy stayed in force.",
        "", ""}},
      {p + "policy_last_reload_success_timestamp_seconds",
       {"gauge",
        "Unix time the policy file was last loaded or reloaded successfully (0: never, or no "
        "--policy).",
        "", ""}},
      {p + "build_info",
       {"gauge", "Always 1; the version, commit and compiler labels are the running build's.",
        "commit,compiler,version", ""}},
      {p + "fresh_node_checks_total",
       {"counter",
        "Eviction attempts checked on a fresh read of the node (--fresh-node-check), by result; "
        "taint_gone ones wrote nothing and are retried.",
        "result", ""}},
      {p + "fresh_node_reads_total",
       {"counter", "GETs of a node sent for --fresh-node-check (one per node per second at most).",
        "", ""}},
  };
  registry r;
  const auto m =
      register_standard_metrics(r, {"v1.2.3", "0123456789ab", "gcc 12.2.0"}, every_series);
  m.api_requests.with({"DELETE", "200"}).inc();
  m.api_request_duration.with({"DELETE"}).observe(0.01);
  m.api_request_duration.with({"GET"}).observe(100);
  m.eviction_wait_duration.observe(12);
  m.policy_reload_failures.inc();
  const auto text = r.render();
  const auto scraped = parse_exposition(text);
  EXPECT_EQ(scraped, golden) << text;
  for (const auto& [name, shape] : golden) {
    EXPECT_EQ(scraped.count(name), 1U) << "missing: " << name;
  }
  for (const auto& [name, shape] : scraped) {
    EXPECT_EQ(golden.count(name), 1U) << "not documented: " << name;
  }
  EXPECT_NE(
      text.find(
          p + "build_info{commit=\"0123456789ab\",compiler=\"gcc 12.2.0\",version=\"v1.2.3\"} 1\n"),
      std::string::npos);
  EXPECT_NE(text.find(p + "policy_last_reload_successful 1\n"), std::string::npos) << text;
  // policy_info: one series, the policy in force; a change removes the old one.
  m.policy_info.with({"aaa"}).set(1);
  m.policy_info.keep_only({"bbb"});
  m.policy_info.with({"bbb"}).set(1);
  const auto info = r.render();
  EXPECT_EQ(info.find("sha256=\"aaa\""), std::string::npos) << info;
  EXPECT_NE(info.find(p + "policy_info{sha256=\"bbb\"} 1\n"), std::string::npos) << info;
  EXPECT_NE(text.find(p + "tainted_nodes 2\n"), std::string::npos);
  EXPECT_NE(text.find(p + "evictions_waiting 4\n"), std::string::npos);
  EXPECT_NE(text.find(p + "storm_breaker_open 1\n"), std::string::npos);
  EXPECT_NE(text.find(p + "dry_run_pod_deletions_total 5\n"), std::string::npos);
  EXPECT_NE(text.find(p + "deadlines_from_taint_time_total 6\n"), std::string::npos);
  EXPECT_NE(text.find(p + "pods_skipped_total{reason=\"pod_selector\"} 7\n"), std::string::npos);
  EXPECT_NE(text.find(p + "toleration_overrides_total 8\n"), std::string::npos);
  EXPECT_NE(text.find(p + "pod_evictions_total 9\n"), std::string::npos);
  EXPECT_NE(text.find(p + "eviction_refusals_total 10\n"), std::string::npos);
  EXPECT_NE(text.find(p + "evictions_blocked 11\n"), std::string::npos);
  EXPECT_NE(text.find(p + "eviction_fallbacks_total 12\n"), std::string::npos);
  EXPECT_NE(text.find(p + "terminating_pods_skipped_total 13\n"), std::string::npos);
  EXPECT_NE(text.find(p + "eviction_wait_duration_seconds_bucket{le=\"30\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find(p + "policy_reload_failures_total 1\n"), std::string::npos);
  EXPECT_NE(text.find(p + "watch_restarts_total{resource=\"pods\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find(p + "api_requests_total{code=\"200\",verb=\"DELETE\"} 1\n"),
            std::string::npos);
  EXPECT_THROW(register_standard_metrics(r, {"again", "x", "y"}, every_series),
               std::invalid_argument);
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

TEST(metrics, scrape_time_families_are_read_at_each_render) {
  registry r;
  std::atomic<int> reads{0};
  scrape_stats s;
  register_standard_metrics(r, {"1", "c", "cc"}, [&] {
    ++reads;
    return s;
  });
  EXPECT_EQ(reads.load(), 0);
  const std::string p = "taint_eviction_controller_";
  auto text = r.render();
  EXPECT_EQ(reads.load(), 1);
  EXPECT_NE(text.find(p + "scheduled_evictions_total 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find(p + "stuck_evictions 0\n"), std::string::npos);
  EXPECT_EQ(text.find(p + "events_total"), std::string::npos) << "no children, no family";
  s.scheduled_evictions = 7;
  s.stuck_evictions = 3;
  s.events = {{"sent", 2}, {"dropped_full", 1}};
  text = r.render();
  EXPECT_EQ(reads.load(), 2);
  EXPECT_NE(text.find(p + "scheduled_evictions_total 7\n"), std::string::npos) << text;
  EXPECT_NE(text.find(p + "stuck_evictions 3\n"), std::string::npos);
  EXPECT_NE(text.find(p + "events_total{result=\"dropped_full\"} 1\n" + p +
                      "events_total{result=\"sent\"} 2\n"),
            std::string::npos)
      << text;
  // Gauges go down.
  s.stuck_evictions = 0;
  EXPECT_NE(r.render().find(p + "stuck_evictions 0\n"), std::string::npos);
}

// A total read lower than the last one exposed (two counters read one after the other) must
// not make a counter go down: Prometheus would take it for a restart and count a reset.
TEST(metrics, scrape_time_counters_never_go_down) {
  registry r;
  scrape_stats s;
  register_standard_metrics(r, {"1", "c", "cc"}, [&] { return s; });
  const std::string p = "taint_eviction_controller_";
  s.pod_deletion_retries = 5;
  s.pod_deletion_failures = {{"timeout", 4}};
  (void)r.render();
  s.pod_deletion_retries = 3;
  s.pod_deletion_failures = {{"timeout", 2}, {"forbidden", 1}};
  auto text = r.render();
  EXPECT_NE(text.find(p + "pod_deletion_retries_total 5\n"), std::string::npos) << text;
  EXPECT_NE(text.find(p + "pod_deletion_failures_total{reason=\"timeout\"} 4\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find(p + "pod_deletion_failures_total{reason=\"forbidden\"} 1\n"),
            std::string::npos);
  s.pod_deletion_retries = 6;
  text = r.render();
  EXPECT_NE(text.find(p + "pod_deletion_retries_total 6\n"), std::string::npos) << text;
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
