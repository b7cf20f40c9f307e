#include "tec/policy/policy_file.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "policy/support/load.hpp"

namespace tec::policy {
namespace {

using test::load_policy_file;
using ::testing::HasSubstr;

constexpr const char* header =
    "apiVersion: taint-eviction-controller/v1alpha1\n"
    "kind: EvictionPolicy\n";

parse_result parse(const std::string& body) {
  return parse_policy(std::string(header) + body, "policy.yaml");
}

/// The single error of `r` (fails the test if there is not exactly one).
std::string only_error(const parse_result& r) {
  EXPECT_FALSE(r.policy);
  EXPECT_EQ(r.errors.size(), 1U) << r.summary();
  return r.errors.empty() ? std::string() : r.errors.front();
}

TEST(policy_file, header_only_is_no_policy) {
  const auto r = parse("");
  ASSERT_TRUE(r) << r.summary();
  EXPECT_EQ(*r.policy, controller::eviction_policy{});
  EXPECT_TRUE(r.policy->rate_limit.unlimited());
  EXPECT_FALSE(r.policy->storm_breaker.enabled());
  EXPECT_FALSE(r.policy->dry_run);
}

TEST(policy_file, every_field) {
  const auto r = parse(
      "dryRun: true\n"
      "rateLimit:\n"
      "  evictionsPerSecond: 2.5\n"
      "  burst: 10\n"
      "  maxInFlightPerNode: 3\n"
      "  maxInFlightPerNamespace: 4\n"
      "stormBreaker:\n"
      "  maxTaintedNodesPercent: 50\n"
      "  minTaintedNodes: 3\n"
      "  hysteresisPercent: 10\n"
      "  taintKeys: [node.kubernetes.io/unreachable, node.kubernetes.io/not-ready]\n");
  ASSERT_TRUE(r) << r.summary();
  const auto& p = *r.policy;
  EXPECT_TRUE(p.dry_run);
  EXPECT_DOUBLE_EQ(p.rate_limit.evictions_per_second, 2.5);
  EXPECT_EQ(p.rate_limit.burst, 10U);
  EXPECT_EQ(p.rate_limit.max_in_flight_per_node, 3U);
  EXPECT_EQ(p.rate_limit.max_in_flight_per_namespace, 4U);
  EXPECT_DOUBLE_EQ(p.storm_breaker.max_tainted_nodes_percent, 50);
  EXPECT_EQ(p.storm_breaker.min_tainted_nodes, 3U);
  EXPECT_DOUBLE_EQ(p.storm_breaker.hysteresis_percent, 10);
  EXPECT_THAT(p.storm_breaker.taint_keys, ::testing::ElementsAre("node.kubernetes.io/unreachable",
                                                                 "node.kubernetes.io/not-ready"));
}

TEST(policy_file, null_means_not_set) {
  const auto r = parse("dryRun:\nrateLimit: ~\nstormBreaker:\n  taintKeys: null\n");
  ASSERT_TRUE(r) << r.summary();
  EXPECT_EQ(*r.policy, controller::eviction_policy{});
}

TEST(policy_file, unknown_field_names_the_line_and_path) {
  const auto e = only_error(parse("rateLimit:\n  burts: 3\n"));
  EXPECT_THAT(e, HasSubstr("policy.yaml:4:3: rateLimit.burts: unknown field"));
  EXPECT_THAT(e, HasSubstr("burst"));
}

TEST(policy_file, unknown_top_level_field) {
  EXPECT_THAT(only_error(parse("dryrun: true\n")),
              HasSubstr("policy.yaml:3:1: dryrun: unknown field"));
}

TEST(policy_file, duplicate_field) {
  EXPECT_THAT(only_error(parse("dryRun: true\ndryRun: false\n")),
              HasSubstr("policy.yaml:4:1: dryRun: duplicate field"));
}

TEST(policy_file, wrong_types) {
  EXPECT_THAT(only_error(parse("dryRun: yes\n")), HasSubstr("dryRun: expected true or false"));
  EXPECT_THAT(only_error(parse("dryRun: \"true\"\n")),
              HasSubstr("dryRun: expected true or false, got the quoted string"));
  EXPECT_THAT(only_error(parse("rateLimit:\n  burst: \"5\"\n")),
              HasSubstr("rateLimit.burst: expected a whole number"));
  EXPECT_THAT(only_error(parse("rateLimit:\n  burst: 1.5\n")),
              HasSubstr("rateLimit.burst: expected a whole number"));
  EXPECT_THAT(only_error(parse("rateLimit: 5\n")),
              HasSubstr("rateLimit: expected a mapping, got \"5\""));
  EXPECT_THAT(only_error(parse("rateLimit:\n  evictionsPerSecond: fast\n")),
              HasSubstr("rateLimit.evictionsPerSecond: expected a number"));
  EXPECT_THAT(only_error(parse("rateLimit:\n  evictionsPerSecond: .nan\n")),
              HasSubstr("expected a number"));
  EXPECT_THAT(only_error(parse("stormBreaker:\n  taintKeys: node.kubernetes.io/unreachable\n")),
              HasSubstr("stormBreaker.taintKeys: expected a list"));
}

TEST(policy_file, out_of_range_values) {
  EXPECT_THAT(only_error(parse("rateLimit:\n  burst: -1\n")),
              HasSubstr("rateLimit.burst: must not be negative"));
  EXPECT_THAT(only_error(parse("rateLimit:\n  evictionsPerSecond: -0.5\n")),
              HasSubstr("must not be negative"));
  EXPECT_THAT(only_error(parse("rateLimit:\n  evictionsPerSecond: 1e300\n")),
              HasSubstr("must be at most 1000000"));
  EXPECT_THAT(only_error(parse("rateLimit:\n  maxInFlightPerNode: 99999999999999999999\n")),
              HasSubstr("rateLimit.maxInFlightPerNode: expected a whole number"));
  EXPECT_THAT(only_error(parse("stormBreaker:\n  maxTaintedNodesPercent: 101\n")),
              HasSubstr("stormBreaker.maxTaintedNodesPercent: must be at most 100"));
  EXPECT_THAT(only_error(parse("stormBreaker:\n  maxTaintedNodesPercent: 20\n"
                               "  hysteresisPercent: 30\n")),
              HasSubstr("hysteresisPercent: must not exceed maxTaintedNodesPercent"));
}

TEST(policy_file, taint_key_syntax) {
  EXPECT_THAT(only_error(parse("stormBreaker:\n  taintKeys: [\"bad key\"]\n")),
              HasSubstr("stormBreaker.taintKeys[0]: not a valid taint key"));
  EXPECT_THAT(only_error(parse("stormBreaker:\n  taintKeys: [a/b/c]\n")),
              HasSubstr("taintKeys[0]: not a valid taint key"));
  EXPECT_THAT(only_error(parse("stormBreaker:\n  taintKeys: [/x]\n")),
              HasSubstr("not a valid taint key"));
  EXPECT_TRUE(parse("stormBreaker:\n  taintKeys: [example.com/maintenance, plain_key.v1]\n"));
}

TEST(policy_file, every_problem_is_reported) {
  const auto r = parse("dryRun: maybe\nrateLimit:\n  burst: x\n  qps: 3\n");
  EXPECT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 3U) << r.summary();
  EXPECT_THAT(r.summary(), HasSubstr("dryRun"));
  EXPECT_THAT(r.summary(), HasSubstr("rateLimit.burst"));
  EXPECT_THAT(r.summary(), HasSubstr("rateLimit.qps: unknown field"));
}

TEST(policy_file, header_is_required_and_checked) {
  EXPECT_THAT(only_error(parse_policy("kind: EvictionPolicy\n", "p")),
              HasSubstr("apiVersion: missing"));
  EXPECT_THAT(only_error(parse_policy("apiVersion: taint-eviction-controller/v1alpha1\n", "p")),
              HasSubstr("kind: missing"));
  EXPECT_THAT(only_error(parse_policy("apiVersion: v1\nkind: EvictionPolicy\n", "p")),
              HasSubstr("p:1:13: apiVersion: must be taint-eviction-controller/v1alpha1"));
  EXPECT_THAT(only_error(parse_policy(
                  "apiVersion: taint-eviction-controller/v1alpha1\nkind: ConfigMap\n", "p")),
              HasSubstr("kind: must be EvictionPolicy"));
}

TEST(policy_file, not_yaml_or_not_a_mapping) {
  EXPECT_THAT(only_error(parse_policy("a: [1, 2\n", "p")), HasSubstr("p:"));
  EXPECT_THAT(only_error(parse_policy("a: [1, 2\n", "p")), HasSubstr("not valid YAML"));
  EXPECT_THAT(only_error(parse_policy("- 1\n- 2\n", "p")),
              HasSubstr("expected an EvictionPolicy mapping, got a list"));
  EXPECT_THAT(only_error(parse_policy("", "p")),
              HasSubstr("expected an EvictionPolicy mapping, got null"));
}

TEST(policy_file, control_characters_in_values_are_not_echoed) {
  const auto e = only_error(parse("dryRun: \"a\\nb\"\n"));
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(policy_file, load_reads_a_file_and_bounds_its_size) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("tec-policy-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "policy.yaml").string();
  {
    std::ofstream out(path);
    out << header << "dryRun: true\n";
  }
  const auto ok = load_policy_file(path);
  ASSERT_TRUE(ok) << ok.summary();
  EXPECT_TRUE(ok.policy->dry_run);

  {
    std::ofstream out(path);
    out << header << "# " << std::string(max_file_bytes, 'x') << "\n";
  }
  EXPECT_THAT(only_error(load_policy_file(path)), HasSubstr("larger than"));
  EXPECT_THAT(only_error(load_policy_file((dir / "missing.yaml").string())),
              HasSubstr("cannot open"));
  // Neither a directory nor a device (read endlessly) nor a FIFO (blocks until a writer).
  EXPECT_THAT(only_error(load_policy_file(dir.string())), HasSubstr("not a regular file"));
  EXPECT_THAT(only_error(load_policy_file("/dev/zero")), HasSubstr("not a regular file"));
  std::filesystem::remove_all(dir);
}

TEST(policy_file, describe_says_what_the_policy_does) {
  EXPECT_EQ(describe(controller::eviction_policy{}),
            "dry-run off, no rate limit, in flight per node unlimited, per namespace unlimited, "
            "storm breaker off, no exclusions, no taint rules");
  controller::eviction_policy p;
  p.dry_run = true;
  p.rate_limit = {2.5, 10, 3, 0};
  p.storm_breaker = {50, 3, 10, {"a/b", "c"}};
  EXPECT_EQ(describe(p),
            "dry-run on, rate limit 2.5/s burst 10, in flight per node 3, per namespace "
            "unlimited, storm breaker above 50% of nodes tainted (at least 3 nodes), closing "
            "below 40%, taint keys a/b,c, no exclusions, no taint rules");
}

}  // namespace
}  // namespace tec::policy

// --- scoping: exclude and taints (issue 15 items 1-2) ---

namespace tec::policy {
namespace {

TEST(policy_scope, every_field) {
  const auto r = parse(
      "exclude:\n"
      "  namespaces: [kube-system, monitoring]\n"
      "  podSelector:\n"
      "    matchLabels: {protected: \"true\"}\n"
      "    matchExpressions:\n"
      "      - {key: tier, operator: In, values: [db, cache]}\n"
      "      - {key: example.com/canary, operator: DoesNotExist}\n"
      "  mirrorPods: true\n"
      "  terminalPods: true\n"
      "  daemonSetPods: true\n"
      "taints:\n"
      "  - key: vendor.example.com/*\n"
      "    action: Ignore\n"
      "  - key: node.kubernetes.io/unreachable\n"
      "    minTolerationSeconds: 120\n"
      "    maxTolerationSeconds: 900\n"
      "  - {key: \"*\", action: Evict, maxTolerationSeconds: 3600}\n");
  ASSERT_TRUE(r) << r.summary();
  const auto& ex = r.policy->exclude;
  EXPECT_THAT(ex.namespaces, ::testing::ElementsAre("kube-system", "monitoring"));
  ASSERT_EQ(ex.pod_selector.match_labels.size(), 1U);
  EXPECT_EQ(ex.pod_selector.match_labels[0].first, "protected");
  EXPECT_EQ(ex.pod_selector.match_labels[0].second, "true");
  ASSERT_EQ(ex.pod_selector.match_expressions.size(), 2U);
  EXPECT_EQ(ex.pod_selector.match_expressions[0].operator_, controller::label_requirement::op::in);
  EXPECT_THAT(ex.pod_selector.match_expressions[0].values, ::testing::ElementsAre("db", "cache"));
  EXPECT_EQ(ex.pod_selector.match_expressions[1].operator_,
            controller::label_requirement::op::does_not_exist);
  EXPECT_TRUE(ex.mirror_pods);
  EXPECT_TRUE(ex.terminal_pods);
  EXPECT_TRUE(ex.daemon_set_pods);
  const auto& t = r.policy->taints;
  ASSERT_EQ(t.size(), 3U);
  EXPECT_EQ(t[0].key, "vendor.example.com/");
  EXPECT_TRUE(t[0].prefix);
  EXPECT_EQ(t[0].action, controller::taint_action::ignore);
  EXPECT_EQ(t[1].key, "node.kubernetes.io/unreachable");
  EXPECT_FALSE(t[1].prefix);
  EXPECT_EQ(t[1].action, controller::taint_action::evict);
  EXPECT_EQ(t[1].min_toleration_seconds, 120);
  EXPECT_EQ(t[1].max_toleration_seconds, 900);
  EXPECT_EQ(t[2].key, "");
  EXPECT_TRUE(t[2].prefix);
  const std::string d = describe(*r.policy);
  EXPECT_THAT(d, HasSubstr("namespaces kube-system,monitoring"));
  EXPECT_THAT(d, HasSubstr("vendor.example.com/* Ignore"));
  EXPECT_THAT(d, HasSubstr("node.kubernetes.io/unreachable Evict min 120s max 900s"));
}

TEST(policy_scope, the_issues_defaults_are_no_policy) {
  const auto r = parse(
      "exclude:\n"
      "  namespaces: []\n"
      "  podSelector: {}\n"
      "  mirrorPods: false\n"
      "  terminalPods: false\n"
      "  daemonSetPods: false\n"
      "taints: []\n");
  ASSERT_TRUE(r) << r.summary();
  EXPECT_EQ(*r.policy, controller::eviction_policy{});
  EXPECT_THAT(describe(*r.policy), HasSubstr("no exclusions, no taint rules"));
}

TEST(policy_scope, bad_taint_key_syntax) {
  for (const char* key : {"\"*foo\"", "a*b", "example.com/**", "\"bad key\"", "-x", "a/b/c*"}) {
    const auto e = only_error(parse(std::string("taints:\n  - key: ") + key + "\n"));
    EXPECT_THAT(e, HasSubstr("taints[0].key: not a valid taint key or prefix")) << key;
  }
}

TEST(policy_scope, negative_seconds) {
  const auto e = only_error(parse("taints:\n  - {key: a, minTolerationSeconds: -5}\n"));
  EXPECT_THAT(e, HasSubstr("taints[0].minTolerationSeconds: must not be negative, got -5"));
}

TEST(policy_scope, floor_above_cap) {
  const auto e = only_error(
      parse("taints:\n  - {key: a, minTolerationSeconds: 900, maxTolerationSeconds: 120}\n"));
  EXPECT_THAT(e, HasSubstr("taints[0].minTolerationSeconds: must not exceed maxTolerationSeconds "
                           "(900 > 120)"));
}

TEST(policy_scope, absurd_seconds) {
  const auto e = only_error(parse("taints:\n  - {key: a, maxTolerationSeconds: 99999999999}\n"));
  EXPECT_THAT(e, HasSubstr("must be at most 3153600000"));
}

TEST(policy_scope, ignore_with_seconds_and_unknown_action) {
  EXPECT_THAT(only_error(parse("taints:\n  - {key: a, action: Ignore, minTolerationSeconds: 5}\n")),
              HasSubstr("no effect with action Ignore"));
  EXPECT_THAT(only_error(parse("taints:\n  - {key: a, action: Drop}\n")),
              HasSubstr("taints[0].action: must be Evict or Ignore"));
  EXPECT_THAT(only_error(parse("taints:\n  - {action: Ignore}\n")),
              HasSubstr("taints[0].key: missing"));
}

TEST(policy_scope, a_rule_an_earlier_one_shadows) {
  EXPECT_THAT(only_error(parse("taints:\n  - {key: example.com/*}\n  - {key: example.com/a}\n")),
              HasSubstr("taints[1].key: never applies: an earlier rule (example.com/*)"));
  EXPECT_THAT(only_error(parse("taints:\n  - {key: a}\n  - {key: a, action: Ignore}\n")),
              HasSubstr("taints[1].key: never applies"));
  // A more specific rule first is fine.
  EXPECT_TRUE(parse("taints:\n  - {key: example.com/a}\n  - {key: example.com/*}\n"));
}

TEST(policy_evict, mode_and_fallbacks) {
  const auto r = parse(
      "evictionMode: Evict\nfallbackAfter: 10m\ntaints:\n"
      "  - {key: node.kubernetes.io/out-of-service, fallbackAfter: 30s}\n"
      "  - {key: example.com/*, fallbackAfter: 0s}\n  - {key: other}\n");
  ASSERT_TRUE(r.policy) << (r.errors.empty() ? "" : r.errors.front());
  EXPECT_EQ(r.policy->mode, controller::eviction_mode::evict);
  EXPECT_EQ(r.policy->fallback_after, std::chrono::minutes(10));
  ASSERT_EQ(r.policy->taints.size(), 3U);
  EXPECT_EQ(r.policy->taints[0].fallback_after, std::chrono::seconds(30));
  EXPECT_EQ(r.policy->taints[1].fallback_after, std::chrono::milliseconds(0));
  EXPECT_FALSE(r.policy->taints[2].fallback_after.has_value());
  EXPECT_THAT(describe(*r.policy), HasSubstr("evictionMode Evict, fallback after 10m"));
  EXPECT_THAT(describe(*r.policy), HasSubstr("example.com/* Evict fallback never"));

  const auto d = parse("evictionMode: Delete\n");
  ASSERT_TRUE(d.policy);
  EXPECT_EQ(*d.policy, controller::eviction_policy{});  // Delete is the default: no policy
}

TEST(policy_evict, bad_values) {
  EXPECT_THAT(only_error(parse("evictionMode: Foo\n")),
              HasSubstr(":3:15: evictionMode: must be Delete or Evict, got \"Foo\""));
  EXPECT_THAT(only_error(parse("fallbackAfter: -5s\n")),
              HasSubstr("fallbackAfter: must not be negative, got \"-5s\""));
  // Negative although it rounds to 0 ms; minus zero is zero, as in Go.
  EXPECT_THAT(only_error(parse("fallbackAfter: -0.4ms\n")),
              HasSubstr("fallbackAfter: must not be negative, got \"-0.4ms\""));
  const auto minus_zero = parse("fallbackAfter: -0.0s\nmaxHold: +1h\n");
  ASSERT_TRUE(minus_zero.policy) << minus_zero.summary();
  EXPECT_EQ(minus_zero.policy->fallback_after, std::chrono::milliseconds{0});
  EXPECT_EQ(minus_zero.policy->max_hold, std::chrono::hours{1});
  EXPECT_THAT(only_error(parse("fallbackAfter: abc\n")),
              HasSubstr("fallbackAfter: expected a duration such as 30s, 10m or 1h30m"));
  EXPECT_THAT(only_error(parse("fallbackAfter: 10\n")), HasSubstr("expected a duration"));
  EXPECT_THAT(only_error(parse("fallbackAfter: 1000000h\n")),
              HasSubstr("must be at most 100 years"));
  EXPECT_THAT(only_error(parse("taints:\n  - {key: a, fallbackAfter: 1x}\n")),
              HasSubstr("taints[0].fallbackAfter: expected a duration"));
  EXPECT_THAT(only_error(parse("taints:\n  - {key: a, action: Ignore, fallbackAfter: 1m}\n")),
              HasSubstr("taints[0].fallbackAfter: has no effect with action Ignore"));
}

TEST(policy_scope, bad_exclude_values) {
  EXPECT_THAT(only_error(parse("exclude:\n  namespaces: [Kube_System]\n")),
              HasSubstr("exclude.namespaces[0]: not a valid namespace name"));
  EXPECT_THAT(only_error(parse("exclude:\n  mirrorPods: yes\n")),
              HasSubstr("exclude.mirrorPods: expected true or false"));
  EXPECT_THAT(only_error(parse("exclude:\n  podSelector: {matchLabels: {app: \"a b\"}}\n")),
              HasSubstr("not a valid label value"));
  EXPECT_THAT(only_error(parse(
                  "exclude:\n  podSelector:\n    matchExpressions: [{key: a, operator: In}]\n")),
              HasSubstr("values: must not be empty for In and NotIn"));
  EXPECT_THAT(only_error(parse("exclude:\n  podSelector:\n    matchExpressions:\n"
                               "      - {key: a, operator: Exists, values: [x]}\n")),
              HasSubstr("values: must be empty for Exists and DoesNotExist"));
  EXPECT_THAT(only_error(parse("exclude:\n  podSelector:\n    matchExpressions:\n"
                               "      - {key: a, operator: Has}\n")),
              HasSubstr("must be In, NotIn, Exists or DoesNotExist"));
  EXPECT_THAT(only_error(parse("exclude:\n  podSelector: {matchFields: {}}\n")),
              HasSubstr("exclude.podSelector.matchFields: unknown field"));
}

}  // namespace
}  // namespace tec::policy

// --- holds and settling (issue 32 items 3-4) ---

namespace tec::policy {
namespace {

TEST(policy_holds, max_hold_defaults_to_an_hour_and_is_bounded) {
  EXPECT_EQ(controller::eviction_policy{}.max_hold, std::chrono::hours(1));
  const auto r = parse("maxHold: 20s\n");
  ASSERT_TRUE(r) << r.summary();
  EXPECT_EQ(r.policy->max_hold, std::chrono::seconds(20));
  EXPECT_EQ(parse("").policy->max_hold, std::chrono::hours(1));
  EXPECT_THAT(only_error(parse("maxHold: 0s\n")),
              HasSubstr("maxHold: must be more than 0s and at most 168h (a week), got \"0s\""));
  EXPECT_THAT(only_error(parse("maxHold: 169h\n")), HasSubstr("maxHold: must be more than 0s"));
  EXPECT_THAT(only_error(parse("maxHold: -1s\n")), HasSubstr("maxHold: must not be negative"));
  EXPECT_THAT(only_error(parse("maxHold: forever\n")), HasSubstr("maxHold: expected a duration"));
  controller::eviction_policy p;
  p.max_hold = std::chrono::minutes(5);
  EXPECT_THAT(describe(p), HasSubstr(", maxHold 5m"));
}

TEST(policy_holds, settle_seconds_needs_the_breaker_and_is_bounded) {
  const auto r = parse("stormBreaker:\n  maxTaintedNodesPercent: 50\n  settleSeconds: 10\n");
  ASSERT_TRUE(r) << r.summary();
  EXPECT_EQ(r.policy->storm_breaker.settle_seconds, 10U);
  EXPECT_THAT(describe(*r.policy), HasSubstr("any NoExecute taint, settling 10s"));
  EXPECT_THAT(
      only_error(parse("stormBreaker:\n  settleSeconds: 10\n")),
      HasSubstr("stormBreaker.settleSeconds: has no effect without maxTaintedNodesPercent"));
  EXPECT_THAT(only_error(parse("stormBreaker:\n  maxTaintedNodesPercent: 50\n"
                               "  settleSeconds: 601\n")),
              HasSubstr("stormBreaker.settleSeconds: must be at most 600"));
  EXPECT_THAT(only_error(parse("stormBreaker:\n  maxTaintedNodesPercent: 50\n"
                               "  settleSeconds: 1.5\n")),
              HasSubstr("stormBreaker.settleSeconds: expected a whole number"));
  EXPECT_TRUE(parse("stormBreaker:\n  settleSeconds: 0\n"));
}

}  // namespace
}  // namespace tec::policy
