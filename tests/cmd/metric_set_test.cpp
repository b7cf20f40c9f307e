// The set /metrics shows: the daemon's own families and every library's table, as the daemon
// publishes them (publish_metric_set). README "What to look at" and docs/operations.md list
// them: a rename, a new label, other buckets or another help text must be deliberate (change
// the docs and this list together).

#include "metric_set.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <map>
#include <string>

#include "controller/support/fakes.hpp"
#include "support/exposition.hpp"
#include "support/manual_driver.hpp"
#include "tec/k8sclient/client.hpp"

namespace tec::cmd {
namespace {

k8sclient::rest_config closed_port() {
  k8sclient::rest_config c;
  c.host = "127.0.0.1";
  c.port = "1";
  c.tls = false;
  return c;
}

// The libraries the daemon publishes, built as it builds them but never run: a controller in
// manual mode, and a sink and a recorder whose client (to a closed port) sends nothing.
struct libraries {
  boost::asio::io_context io;
  k8sclient::client api{io.get_executor(), closed_port(), {}};
  writers::event_recorder recorder{io.get_executor(), api, {}};
  writers::k8s_eviction_sink sink{io.get_executor(), api, &recorder};
  controller::testing::fake_index pods;
  controller::testing::recording_sink fake_sink{&pods};
  timedqueue::manual_driver driver;
  controller::controller ctrl{pods, fake_sink, driver, [] {
                                controller::controller_options o;
                                o.threaded = false;
                                return o;
                              }()};
  k8sclient::reflector_stats pod_watch{.watch_restarts = 1};
  k8sclient::reflector_stats node_watch{.backoffs = 3};

  ~libraries() { ctrl.shutdown(); }
};

TEST(metric_set, is_the_documented_one) {
  const std::string p = "taint_eviction_controller_";
  const std::string deletion_buckets = "0.005 0.025 0.1 0.5 1 2.5 10 30 60 120 180 240 +Inf";
  const std::map<std::string, test::family_shape> golden = {
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
      {p + "node_updates_total",
       {"counter", "Node updates taken in (queued for a worker or merged into one waiting).", "",
        ""}},
      {p + "pod_updates_total",
       {"counter", "Pod updates taken in (queued for a worker or merged into one waiting).", "",
        ""}},
      {p + "updates_ignored_total",
       {"counter", "Node and pod updates ignored: nothing that decides an eviction changed.", "",
        ""}},
      {p + "updates_coalesced_total",
       {"counter", "Node and pod updates merged into one already waiting.", "", ""}},
      {p + "pod_decisions_total", {"counter", "Pods decided on a tainted node.", "", ""}},
      {p + "evictions_started_total",
       {"counter", "Evictions started (their first deletion attempt).", "", ""}},
      {p + "evictions_succeeded_total",
       {"counter", "Evictions done: the pod was deleted (or evicted), or was gone.", "", ""}},
      {p + "eviction_attempt_failures_total",
       {"counter", "Eviction attempts that failed (each is retried).", "", ""}},
      {p + "evictions_skipped_total",
       {"counter", "Evictions that fired for a pod gone or replaced: no API call.", "", ""}},
      {p + "stale_evictions_dropped_total",
       {"counter", "Evictions dropped because the pod of that name has another UID.", "", ""}},
      {p + "stuck_reports_total",
       {"counter",
        "Stuck reports (a warning and a TaintEvictionFailed Event): an eviction failed 5 times in "
        "a row, and again while it stays stuck.",
        "", ""}},
      {p + "policy_info",
       {"gauge", "Always 1; sha256 is the SHA-256 of the policy file in force.", "sha256", ""}},
      // With --shadow only.
      {p + "shadow_decisions_total",
       {"counter",
        "Shadow mode: pods settled by outcome (agreed, only_them, only_us, cancelled_both, "
        "ambiguous).",
        "outcome", ""}},
      {p + "shadow_agreement_delay_seconds",
       {"histogram",
        "Shadow mode: seconds between the built-in taint manager's eviction and ours, for agreed "
        "pods.",
        "", "0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 30 60 +Inf"}},
      {p + "shadow_pending",
       {"gauge", "Shadow mode: pods with a decision (ours or theirs) not yet settled.", "", ""}},
      {p + "shadow_settled_early_total",
       {"counter",
        "Shadow mode: pods settled early, as their best guess, because too many were pending.", "",
        ""}},
  };
  libraries l;
  metrics::registry r;
  const auto m = metrics::register_standard_metrics(r, {"v1.2.3", "0123456789ab", "gcc 12.2.0"});
  publish_metric_set(r, {.ctrl = l.ctrl,
                         .sink = l.sink,
                         .recorder = l.recorder,
                         .watched = {{"pods", [&l] { return l.pod_watch; }},
                                     {"nodes", [&l] { return l.node_watch; }}}});
  m.api_requests.with({"DELETE", "200"}).inc();
  m.api_request_duration.with({"DELETE"}).observe(0.01);
  m.eviction_wait_duration.observe(12);
  m.policy_info.with({"abc"}).set(1);
  metrics::register_shadow_metrics(r);
  const auto text = r.render();
  const auto scraped = test::parse_exposition(text);
  EXPECT_EQ(scraped, golden) << text;
  for (const auto& [name, shape] : golden) {
    EXPECT_EQ(scraped.count(name), 1U) << "missing: " << name;
  }
  for (const auto& [name, shape] : scraped) {
    EXPECT_EQ(golden.count(name), 1U) << "not documented: " << name;
  }
  // Each library's figures, read at the scrape.
  EXPECT_NE(text.find(p + "watch_restarts_total{resource=\"pods\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find(p + "list_watch_backoffs_total{resource=\"nodes\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find(p + "pods_skipped_total{reason=\"annotation\"} 0\n"), std::string::npos)
      << "every skip reason from the start";
  EXPECT_NE(text.find(p + "pod_deletion_failures_total{reason=\"forbidden\"} 0\n"),
            std::string::npos)
      << "every failure reason from the start";
  EXPECT_NE(text.find(p + "events_total{result=\"sent\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find(p + "dry_run_pod_deletions_total 0\n"), std::string::npos)
      << "one family: the controller's and the sink's counts";
  EXPECT_THROW(publish_metric_set(
                   r, {.ctrl = l.ctrl, .sink = l.sink, .recorder = l.recorder, .watched = {}}),
               std::invalid_argument);
}

}  // namespace
}  // namespace tec::cmd
