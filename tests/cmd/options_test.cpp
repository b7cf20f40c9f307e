// Flag parsing: kube-controller-manager's names and defaults, Go durations, clear errors
// with exit status 2, and the Lease namespace fallback chain.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "options.hpp"

namespace tec::cmd {
namespace {

using namespace std::chrono_literals;

std::optional<std::string> no_env(const std::string& /*name*/) {
  return std::nullopt;
}
std::optional<std::string> no_file(const std::string& /*path*/) {
  return std::nullopt;
}

parse_result parse(const std::vector<std::string>& args, const env_fn& env = no_env,
                   const read_file_fn& file = no_file) {
  return parse_options(args, "9.9.9", env, file);
}

TEST(options, defaults_match_kube_controller_manager) {
  const auto r = parse({});
  ASSERT_TRUE(r.opts) << r.err;
  const auto& o = *r.opts;
  EXPECT_EQ(o.kubeconfig, "");
  EXPECT_EQ(o.kube_api_qps, 20.0);
  EXPECT_EQ(o.kube_api_burst, 30);
  EXPECT_EQ(o.kube_api_connections, 128);
  EXPECT_EQ(o.workers, 8);
  EXPECT_TRUE(o.leader_elect);
  EXPECT_EQ(o.lease_duration, 15s);
  EXPECT_EQ(o.renew_deadline, 10s);
  EXPECT_EQ(o.retry_period, 2s);
  EXPECT_EQ(o.lease_namespace, "kube-system");
  EXPECT_EQ(o.lease_name, "taint-eviction-controller");
  // Issue 31: /metrics and /debug/* moved to HTTPS on a port of their own (was ":8080").
  EXPECT_EQ(o.metrics_bind_address, ":8443");
  EXPECT_TRUE(o.metrics_secure);
  EXPECT_EQ(o.tls_cert_file, "");
  EXPECT_EQ(o.tls_private_key_file, "");
  EXPECT_EQ(o.health_probe_bind_address, ":8081");
  EXPECT_TRUE(o.disruption_condition);
  EXPECT_EQ(o.log_level, "info");
  EXPECT_EQ(o.format, log_format::text);
}

TEST(options, every_flag_is_taken) {
  const auto r = parse({"--kubeconfig=/k", "--context", "c", "--kube-api-qps=5.5",
                        "--kube-api-burst=7", "--kube-api-connections=12", "--workers=3",
                        "--leader-elect=false", "--leader-elect-lease-duration=1m",
                        "--leader-elect-renew-deadline=30s", "--leader-elect-retry-period=500ms",
                        "--leader-elect-resource-namespace=ops", "--leader-elect-resource-name=l",
                        "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0",
                        "--disruption-condition=false", "--log-level=debug", "--log-format=json"});
  ASSERT_TRUE(r.opts) << r.err;
  const auto& o = *r.opts;
  EXPECT_EQ(o.kubeconfig, "/k");
  EXPECT_EQ(o.context, "c");
  EXPECT_EQ(o.kube_api_qps, 5.5);
  EXPECT_EQ(o.kube_api_burst, 7);
  EXPECT_EQ(o.kube_api_connections, 12);
  EXPECT_EQ(o.workers, 3);
  EXPECT_FALSE(o.leader_elect);
  EXPECT_EQ(o.lease_duration, 60s);
  EXPECT_EQ(o.renew_deadline, 30s);
  EXPECT_EQ(o.retry_period, 500ms);
  EXPECT_EQ(o.lease_namespace, "ops");
  EXPECT_EQ(o.lease_name, "l");
  EXPECT_EQ(o.metrics_bind_address, "0");
  EXPECT_EQ(o.health_probe_bind_address, "127.0.0.1:0");
  EXPECT_FALSE(o.disruption_condition);
  EXPECT_EQ(o.log_level, "debug");
  EXPECT_EQ(o.format, log_format::json);
}

TEST(options, bare_boolean_flag_means_true) {
  const auto r = parse({"--leader-elect", "--disruption-condition"});
  ASSERT_TRUE(r.opts) << r.err;
  EXPECT_TRUE(r.opts->leader_elect);
  EXPECT_TRUE(r.opts->disruption_condition);
}

TEST(options, fresh_node_check_is_off_unless_asked_for) {
  const auto none = parse({});
  ASSERT_TRUE(none.opts) << none.err;
  EXPECT_FALSE(none.opts->fresh_node_check);
  const auto bare = parse({"--fresh-node-check"});
  ASSERT_TRUE(bare.opts) << bare.err;
  EXPECT_TRUE(bare.opts->fresh_node_check);
  const auto off = parse({"--fresh-node-check=false"});
  ASSERT_TRUE(off.opts) << off.err;
  EXPECT_FALSE(off.opts->fresh_node_check);
}

TEST(options, help_and_version_exit_zero) {
  const auto h = parse({"--help"});
  EXPECT_FALSE(h.opts);
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("--leader-elect-lease-duration"), std::string::npos);
  const auto v = parse({"--version"});
  EXPECT_FALSE(v.opts);
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.out, "taint-eviction-controller 9.9.9\n");
}

TEST(options, bad_values_exit_two_with_the_flag_named) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--no-such-flag"}, "no-such-flag"},
      {{"--workers=abc"}, "--workers"},
      {{"--workers=0"}, "--workers"},
      {{"--kube-api-qps=-1"}, "--kube-api-qps"},
      {{"--kube-api-qps=0.0000001"}, "--kube-api-qps must be 0 (no limit) or between 1"},
      {{"--kube-api-qps=1e300"}, "--kube-api-qps"},
      {{"--kube-api-burst=1000000"}, "--kube-api-burst"},
      {{"--kube-api-burst=0"}, "--kube-api-burst"},
      {{"--kube-api-connections=2"}, "--kube-api-connections"},
      {{"--leader-elect-lease-duration=15"}, "--leader-elect-lease-duration"},
      {{"--leader-elect-lease-duration=fast"}, "--leader-elect-lease-duration"},
      {{"--leader-elect-retry-period=-2s"}, "--leader-elect-retry-period"},
      {{"--leader-elect-renew-deadline=20s"}, "greater than --leader-elect-renew-deadline"},
      {{"--leader-elect-retry-period=9s"}, "1.2 x"},
      {{"--leader-elect-resource-namespace=Bad_NS"}, "--leader-elect-resource-namespace"},
      {{"--metrics-bind-address=nonsense"}, "--metrics-bind-address"},
      {{"--health-probe-bind-address=:99999"}, "--health-probe-bind-address"},
      {{"--log-level=loud"}, "--log-level"},
      {{"--log-format=xml"}, "--log-format"},
      {{"--context=x"}, "--context needs --kubeconfig"},
      {{"--leader-elect=maybe"}, "leader-elect"},
      {{"--tls-cert-file=/c.crt"}, "give both or neither"},
      {{"--tls-private-key-file=/c.key"}, "give both or neither"},
      {{"--metrics-secure=false", "--tls-cert-file=/c", "--tls-private-key-file=/k"},
       "--metrics-secure=false"},
      {{"--metrics-bind-address=:8081"}, "needs a port of its own"},
  };
  for (const auto& [args, needle] : cases) {
    const auto r = parse(args);
    EXPECT_FALSE(r.opts) << args.front();
    EXPECT_EQ(r.exit_code, 2) << args.front();
    EXPECT_NE(r.err.find(needle), std::string::npos) << args.front() << " -> " << r.err;
  }
}

// Kubernetes components' logging flags (component-base): -v/--v and --logging-format, with
// --log-level and --log-format kept as aliases.
TEST(options, kube_logging_names) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> levels{
      {{"--v=0"}, "info"},
      {{"-v", "2"}, "info"},
      {{"-v3"}, "info"},
      {{"-v=4"}, "debug"},
      {{"--v=4"}, "debug"},
      {{"--v", "5"}, "debug"},
      {{"-v", "6"}, "trace"},
      {{"--v=10"}, "trace"},
      {{"--log-level=warn"}, "warn"},
      {{"--v=4", "--log-level=debug"}, "debug"},  // both, agreeing
      {{}, "info"}};
  for (const auto& [args, level] : levels) {
    const auto r = parse(args);
    ASSERT_TRUE(r.opts) << args.front() << ": " << r.err;
    EXPECT_EQ(r.opts->log_level, level) << args.front();
  }
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"--logging-format=json"},
                                             {"--logging-format", "json", "--log-format=json"},
                                             {"--log-format=json"}}) {
    const auto r = parse(args);
    ASSERT_TRUE(r.opts) << args.front() << ": " << r.err;
    EXPECT_EQ(r.opts->format, log_format::json) << args.front();
  }
  EXPECT_EQ(level_for_verbosity(0), "info");
  EXPECT_EQ(level_for_verbosity(4), "debug");
  EXPECT_EQ(level_for_verbosity(6), "trace");
}

TEST(options, kube_logging_names_and_their_aliases_must_agree) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--v=4", "--log-level=info"},
       "-v/--v 4 means the debug level, --log-level says info: give one of them"},
      {{"-v", "0", "--log-level=error"}, "-v/--v 0 means the info level, --log-level says error"},
      {{"--logging-format=json", "--log-format=text"},
       "--logging-format \"json\" and --log-format \"text\" disagree: give one of them"},
      {{"--logging-format=yaml"}, "--logging-format: \"yaml\" is not one of text, json"},
      {{"--v=-1"}, "-v/--v: must be 0 or more, got -1"},
      {{"--v=loud"}, "--v"},
  };
  for (const auto& [args, needle] : cases) {
    const auto r = parse(args);
    EXPECT_FALSE(r.opts) << args.front();
    EXPECT_EQ(r.exit_code, 2) << args.front();
    EXPECT_NE(r.err.find(needle), std::string::npos) << args.front() << " -> " << r.err;
  }
}

TEST(options, lease_checks_are_skipped_without_leader_election) {
  const auto r = parse({"--leader-elect=false", "--leader-elect-renew-deadline=20s"});
  EXPECT_TRUE(r.opts) << r.err;
}

TEST(options, lease_namespace_falls_back_to_pod_namespace_then_service_account_file) {
  const auto env = [](const std::string& name) -> std::optional<std::string> {
    return name == "POD_NAMESPACE" ? std::optional<std::string>("from-env") : std::nullopt;
  };
  const auto file = [](const std::string& path) -> std::optional<std::string> {
    return path == service_account_namespace_file ? std::optional<std::string>("from-file\n")
                                                  : std::nullopt;
  };
  EXPECT_EQ(parse({}, env, file).opts->lease_namespace, "from-env");
  EXPECT_EQ(parse({}, no_env, file).opts->lease_namespace, "from-file");
  EXPECT_EQ(parse({"--leader-elect-resource-namespace=flag"}, env, file).opts->lease_namespace,
            "flag");
}

TEST(options, go_durations) {
  EXPECT_EQ(parse_go_duration("15s"), 15s);
  EXPECT_EQ(parse_go_duration("500ms"), 500ms);
  EXPECT_EQ(parse_go_duration("1m"), 60s);
  EXPECT_EQ(parse_go_duration("1h30m"), 90min);
  EXPECT_EQ(parse_go_duration("1.5s"), 1500ms);
  EXPECT_EQ(parse_go_duration("0"), 0ms);
  EXPECT_EQ(parse_go_duration("2000us"), 2ms);
  EXPECT_EQ(parse_go_duration("-3s"), -3s);
  EXPECT_FALSE(parse_go_duration(""));
  EXPECT_FALSE(parse_go_duration("15"));
  EXPECT_FALSE(parse_go_duration("s"));
  EXPECT_FALSE(parse_go_duration("1d"));
  EXPECT_FALSE(parse_go_duration("1.s.5"));
  EXPECT_FALSE(parse_go_duration("99999999999h"));
  EXPECT_EQ(format_duration(90s), "1m30s");
  EXPECT_EQ(format_duration(1500ms), "1.5s");
  EXPECT_EQ(format_duration(250ms), "250ms");
}

}  // namespace
}  // namespace tec::cmd

namespace tec::cmd {
namespace {

/// A policy reader serving one file, "p.yaml", with `text`.
read_policy_fn policy_file(std::string text) {
  return [text = std::move(text)](const std::string& path) -> base::result<std::string> {
    if (path != "p.yaml") {
      return base::make_error(base::errc::config_invalid, path + ": cannot open the policy file");
    }
    return text;
  };
}

constexpr const char* policy_header =
    "apiVersion: taint-eviction-controller/v1alpha1\n"
    "kind: EvictionPolicy\n";

TEST(options, no_policy_and_no_dry_run_by_default) {
  const auto r = parse({});
  ASSERT_TRUE(r.opts) << r.err;
  EXPECT_EQ(r.opts->policy_file, "");
  EXPECT_FALSE(r.opts->dry_run);
  EXPECT_EQ(r.opts->effective_policy(r.opts->policy), controller::eviction_policy{});
}

TEST(options, the_policy_file_is_read_and_validated_at_start) {
  const auto r = parse_options({"--policy=p.yaml"}, "9.9.9", no_env, no_file,
                               policy_file(std::string(policy_header) +
                                           "rateLimit:\n  evictionsPerSecond: 5\n  burst: 9\n"));
  ASSERT_TRUE(r.opts) << r.err;
  EXPECT_EQ(r.opts->policy_file, "p.yaml");
  EXPECT_DOUBLE_EQ(r.opts->policy.rate_limit.evictions_per_second, 5);
  EXPECT_EQ(r.opts->policy.rate_limit.burst, 9U);
  EXPECT_FALSE(r.opts->effective_policy(r.opts->policy).dry_run);
}

TEST(options, the_policy_configmap_names_where_policy_events_go) {
  const std::string text = std::string(policy_header) + "dryRun: false\n";
  auto r = parse_options(
      {"--policy=p.yaml", "--policy-configmap=pol", "--leader-elect-resource-namespace=tec"},
      "9.9.9", no_env, no_file, policy_file(text));
  ASSERT_TRUE(r.opts) << r.err;
  EXPECT_EQ(r.opts->policy_configmap_namespace, "tec");  // the Lease's
  EXPECT_EQ(r.opts->policy_configmap_name, "pol");
  // sha256sum of the file's text.
  EXPECT_EQ(r.opts->policy_sha256.size(), 64U);
  r = parse_options({"--policy=p.yaml", "--policy-configmap=other/pol"}, "9.9.9", no_env, no_file,
                    policy_file(text));
  ASSERT_TRUE(r.opts) << r.err;
  EXPECT_EQ(r.opts->policy_configmap_namespace, "other");
  for (const char* bad :
       {"--policy-configmap=a/b/c", "--policy-configmap=Bad_Name", "--policy-configmap=/x"}) {
    r = parse_options({"--policy=p.yaml", bad}, "9.9.9", no_env, no_file, policy_file(text));
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--policy-configmap"), std::string::npos) << r.err;
  }
  r = parse({"--policy-configmap=pol"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("needs --policy"), std::string::npos) << r.err;
}

TEST(options, a_bad_policy_file_is_exit_two_with_one_line_naming_every_problem) {
  const auto r =
      parse_options({"--policy", "p.yaml"}, "9.9.9", no_env, no_file,
                    policy_file(std::string(policy_header) + "dryrun: true\nrateLimit: 5\n"));
  EXPECT_FALSE(r.opts);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(
      r.err,
      "taint-eviction-controller: --policy: p.yaml:3:1: dryrun: unknown field (known: "
      "apiVersion, kind, dryRun, evictionMode, fallbackAfter, maxHold, rateLimit, stormBreaker, "
      "exclude, taints, admission); p.yaml:4:12: "
      "rateLimit: "
      "expected a mapping, got \"5\"\nRun with --help for the flags.\n");
  const auto missing =
      parse_options({"--policy=other.yaml"}, "9.9.9", no_env, no_file, policy_file(policy_header));
  EXPECT_FALSE(missing.opts);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--policy: other.yaml: cannot open the policy file"),
            std::string::npos)
      << missing.err;
}

TEST(options, the_real_policy_reader_refuses_what_is_not_a_regular_file) {
  const auto r = parse({"--policy=/dev/zero"});
  EXPECT_FALSE(r.opts);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--policy: /dev/zero: not a regular file"), std::string::npos) << r.err;
}

TEST(options, check_policy_says_what_a_valid_file_does_and_exits_zero) {
  const auto r = parse_options(
      {"--check-policy=p.yaml", "--workers=0"}, "9.9.9", no_env, no_file,
      policy_file(std::string(policy_header) + "rateLimit:\n  evictionsPerSecond: 5\n"));
  EXPECT_FALSE(r.opts);  // never runs: other flags are not even checked
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out,
            "p.yaml: a valid EvictionPolicy: dry-run off, rate limit 5/s burst auto, in flight "
            "per node unlimited, per namespace unlimited, storm breaker off, no exclusions, no "
            "taint rules\n");
  EXPECT_EQ(r.err, "");
}

TEST(options, check_policy_lists_each_problem_on_a_line_and_exits_one) {
  std::string text(policy_header);
  text += "\"a\\nforged\": 1\n";
  for (int i = 0; i < 30; ++i) {
    text += "x" + std::to_string(i) + ": 1\n";
  }
  const auto r =
      parse_options({"--check-policy", "p.yaml"}, "9.9.9", no_env, no_file, policy_file(text));
  EXPECT_FALSE(r.opts);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 21) << r.err;
  EXPECT_NE(r.err.find("taint-eviction-controller: --check-policy: p.yaml:3:1: a\\nforged: "
                       "unknown field"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("taint-eviction-controller: --check-policy: ... and 11 more\n"),
            std::string::npos)
      << r.err;
  const auto fifo = parse({"--check-policy=/dev/null"});
  EXPECT_EQ(fifo.exit_code, 1);
  EXPECT_EQ(fifo.err, "taint-eviction-controller: --check-policy: /dev/null: not a regular file\n");
}

TEST(options, dry_run_flag_forces_dry_run_over_any_policy) {
  const auto r = parse_options({"--dry-run", "--policy=p.yaml"}, "9.9.9", no_env, no_file,
                               policy_file(std::string(policy_header) + "dryRun: false\n"));
  ASSERT_TRUE(r.opts) << r.err;
  EXPECT_TRUE(r.opts->dry_run);
  EXPECT_FALSE(r.opts->policy.dry_run);  // the file's own value, kept for reloads
  EXPECT_TRUE(r.opts->effective_policy(r.opts->policy).dry_run);
  const auto alone = parse({"--dry-run"});
  ASSERT_TRUE(alone.opts) << alone.err;
  EXPECT_TRUE(alone.opts->effective_policy(alone.opts->policy).dry_run);
}

TEST(options, shadow_is_off_by_default_and_implies_dry_run) {
  const auto off = parse({});
  ASSERT_TRUE(off.opts) << off.err;
  EXPECT_FALSE(off.opts->shadow);
  EXPECT_EQ(off.opts->shadow_window, 30s);
  EXPECT_FALSE(off.opts->effective_policy(off.opts->policy).dry_run);
  const auto r =
      parse_options({"--shadow", "--shadow-window=3s", "--policy=p.yaml"}, "9.9.9", no_env, no_file,
                    policy_file(std::string(policy_header) + "dryRun: false\n"));
  ASSERT_TRUE(r.opts) << r.err;
  EXPECT_TRUE(r.opts->shadow);
  EXPECT_FALSE(r.opts->dry_run);
  EXPECT_EQ(r.opts->shadow_window, 3s);
  // A reloaded policy saying dryRun: false cannot turn dry-run off while --shadow.
  EXPECT_TRUE(r.opts->effective_policy(r.opts->policy).dry_run);
  const auto edges = parse({"--shadow", "--shadow-window=1h"});
  ASSERT_TRUE(edges.opts) << edges.err;
  EXPECT_EQ(edges.opts->shadow_window, 1h);
}

TEST(options, deadlines_from_taint_time_and_scheduled_events_are_on_by_default) {
  const std::pair<std::string, bool options::*> flags[] = {
      {"deadlines-from-taint-time", &options::deadlines_from_taint_time},
      {"scheduled-events", &options::scheduled_events},
  };
  for (const auto& [flag, member] : flags) {
    const auto on = parse({});
    ASSERT_TRUE(on.opts) << on.err;
    EXPECT_TRUE((*on.opts).*member) << flag;
    const auto off = parse({"--" + flag + "=false"});
    ASSERT_TRUE(off.opts) << off.err;
    EXPECT_FALSE((*off.opts).*member) << flag;
    const auto bad = parse({"--" + flag + "=maybe"});
    EXPECT_FALSE(bad.opts) << flag;
    EXPECT_NE(bad.err.find(flag), std::string::npos) << bad.err;
  }
}

TEST(options, secure_metrics_flags) {
  const auto files = parse({"--tls-cert-file=/c.crt", "--tls-private-key-file=/c.key",
                            "--metrics-bind-address=127.0.0.1:9443"});
  ASSERT_TRUE(files.opts) << files.err;
  EXPECT_EQ(files.opts->tls_cert_file, "/c.crt");
  EXPECT_EQ(files.opts->tls_private_key_file, "/c.key");
  const auto plain = parse({"--metrics-secure=false", "--metrics-bind-address=:8081"});
  ASSERT_TRUE(plain.opts) << plain.err;  // plain HTTP may share the probes' port
  EXPECT_FALSE(plain.opts->metrics_secure);
  // The wrong combinations are in bad_values_exit_two_with_the_flag_named.
}

TEST(options, a_bad_shadow_window_is_exit_two_with_one_line) {
  for (const std::string bad :
       {"--shadow-window=0s", "--shadow-window=999ms", "--shadow-window=61m",
        "--shadow-window=soon", "--shadow-window=-5s", "--shadow-window=30"}) {
    const auto r = parse({"--shadow", bad});
    EXPECT_FALSE(r.opts) << bad;
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_EQ(r.err.rfind("taint-eviction-controller: --shadow-window: ", 0), 0U) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2)
        << "one line and the hint: " << r.err;
  }
}

}  // namespace
}  // namespace tec::cmd

namespace tec::cmd {
namespace {

TEST(options, webhook_certificates_are_off_unless_a_secret_is_named) {
  auto r = parse({"--leader-elect-resource-namespace=tec"});
  ASSERT_TRUE(r.opts) << r.err;
  EXPECT_EQ(r.opts->webhook_cert_secret_name, "");
  EXPECT_EQ(r.opts->webhook_configuration, "taint-eviction-controller");
  EXPECT_EQ(r.opts->webhook_service_name, "taint-eviction-controller-metrics");
  EXPECT_EQ(r.opts->webhook_service_namespace, "tec");
  EXPECT_EQ(r.opts->webhook_cert_check_interval, 1h);

  r = parse({"--leader-elect-resource-namespace=tec", "--webhook-cert-secret=tls",
             "--webhook-configuration=hook", "--webhook-service=svc",
             "--webhook-cert-check-interval=30s"});
  ASSERT_TRUE(r.opts) << r.err;
  EXPECT_EQ(r.opts->webhook_cert_secret_namespace, "tec");  // the Lease's
  EXPECT_EQ(r.opts->webhook_cert_secret_name, "tls");
  EXPECT_EQ(r.opts->webhook_configuration, "hook");
  EXPECT_EQ(r.opts->webhook_service_namespace, "tec");  // the Secret's
  EXPECT_EQ(r.opts->webhook_service_name, "svc");
  EXPECT_EQ(r.opts->webhook_cert_check_interval, 30s);

  r = parse({"--webhook-cert-secret=ns1/tls", "--webhook-service=ns2/svc"});
  ASSERT_TRUE(r.opts) << r.err;
  EXPECT_EQ(r.opts->webhook_cert_secret_namespace, "ns1");
  EXPECT_EQ(r.opts->webhook_service_namespace, "ns2");
  r = parse({"--webhook-cert-secret=ns1/tls"});
  ASSERT_TRUE(r.opts) << r.err;
  EXPECT_EQ(r.opts->webhook_service_namespace, "ns1");  // the Secret's, not the Lease's
}

TEST(options, bad_webhook_certificate_flags_are_exit_2) {
  for (const char* bad :
       {"--webhook-cert-secret=a/b/c", "--webhook-cert-secret=Bad_Name", "--webhook-service=/x",
        "--webhook-configuration=UPPER", "--webhook-cert-check-interval=5s",
        "--webhook-cert-check-interval=48h", "--webhook-cert-check-interval=soon"}) {
    const auto r = parse({bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    const std::string flag(bad, std::string_view(bad).find('='));
    EXPECT_NE(r.err.find(flag + ":"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;  // and "Run with --help"
  }
}

}  // namespace
}  // namespace tec::cmd

// Every setting flag from an environment variable (--foo-bar from TEC_FOO_BAR).
namespace tec::cmd {
namespace {

// Sets environment variables for the scope of a test and puts back what was there.
class scoped_env {
public:
  explicit scoped_env(const std::vector<std::pair<std::string, std::string>>& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe): one thread
      saved_.emplace_back(name, old == nullptr ? std::nullopt : std::optional<std::string>(old));
      ::setenv(name.c_str(), value.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    }
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;
  scoped_env(scoped_env&&) = delete;
  scoped_env& operator=(scoped_env&&) = delete;
  ~scoped_env() {
    for (const auto& [name, old] : saved_) {
      if (old) {
        ::setenv(name.c_str(), old->c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
      } else {
        ::unsetenv(name.c_str());  // NOLINT(concurrency-mt-unsafe)
      }
    }
  }

private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(options_env, setting_flags_are_read_from_tec_variables) {
  const scoped_env env({{"TEC_WORKERS", "3"},
                        {"TEC_KUBE_API_QPS", "5.5"},
                        {"TEC_LEADER_ELECT", "false"},
                        {"TEC_LEADER_ELECT_LEASE_DURATION", "1m"},
                        {"TEC_LEADER_ELECT_RESOURCE_NAMESPACE", "ops"},
                        {"TEC_METRICS_BIND_ADDRESS", "0"},
                        {"TEC_LOG_FORMAT", "json"},
                        {"TEC_KUBE_API_CONTENT_TYPE", "application/json"}});
  const auto r = parse({});
  ASSERT_TRUE(r.opts) << r.err;
  EXPECT_EQ(r.opts->workers, 3);
  EXPECT_EQ(r.opts->kube_api_qps, 5.5);
  EXPECT_FALSE(r.opts->leader_elect);
  EXPECT_EQ(r.opts->lease_duration, 60s);
  EXPECT_EQ(r.opts->lease_namespace, "ops");
  EXPECT_EQ(r.opts->metrics_bind_address, "0");
  EXPECT_EQ(r.opts->format, log_format::json);
  EXPECT_FALSE(r.opts->protobuf);
}

TEST(options_env, the_command_line_wins_over_the_environment) {
  const scoped_env env({{"TEC_WORKERS", "abc"}, {"TEC_LEADER_ELECT", "false"}});
  const auto r = parse({"--workers=5", "--leader-elect"});
  ASSERT_TRUE(r.opts) << r.err;  // TEC_WORKERS's bad value is never looked at
  EXPECT_EQ(r.opts->workers, 5);
  EXPECT_TRUE(r.opts->leader_elect);
}

TEST(options_env, boolean_variables_take_true_false_1_and_0_and_empty_is_unset) {
  for (const auto& [text, value] : std::vector<std::pair<std::string, bool>>{
           {"true", true}, {"false", false}, {"1", true}, {"0", false}}) {
    const scoped_env env({{"TEC_DRY_RUN", text}, {"TEC_SCHEDULED_EVENTS", text}});
    const auto r = parse({});
    ASSERT_TRUE(r.opts) << text << ": " << r.err;
    EXPECT_EQ(r.opts->dry_run, value) << text;
    EXPECT_EQ(r.opts->scheduled_events, value) << text;
  }
  const scoped_env empty({{"TEC_WORKERS", ""}, {"TEC_LEADER_ELECT", ""}});
  const auto r = parse({});
  ASSERT_TRUE(r.opts) << r.err;
  EXPECT_EQ(r.opts->workers, 8);
  EXPECT_TRUE(r.opts->leader_elect);
}

TEST(options_env, a_bad_value_is_exit_two_with_one_line_naming_the_variable) {
  const std::vector<std::pair<std::pair<std::string, std::string>, std::string>> cases{
      {{"TEC_WORKERS", "abc"}, "--workers (from TEC_WORKERS)"},
      {{"TEC_WORKERS", "0"}, "--workers (from TEC_WORKERS) must be between 1 and 1024"},
      {{"TEC_LEADER_ELECT", "maybe"}, "--leader-elect (from TEC_LEADER_ELECT)"},
      {{"TEC_LOG_FORMAT", "xml"}, "--log-format (from TEC_LOG_FORMAT): \"xml\" is not one of"},
      {{"TEC_LOGGING_FORMAT", "xml"},
       "--logging-format (from TEC_LOGGING_FORMAT): \"xml\" is not one of"},
      {{"TEC_KUBE_API_CONTENT_TYPE", "text/plain"},
       "--kube-api-content-type (from TEC_KUBE_API_CONTENT_TYPE)"},
      {{"TEC_LEADER_ELECT_LEASE_DURATION", "15"},
       "--leader-elect-lease-duration (from TEC_LEADER_ELECT_LEASE_DURATION): invalid duration"},
  };
  for (const auto& [var, needle] : cases) {
    const scoped_env env({var});
    const auto r = parse({});
    EXPECT_FALSE(r.opts) << var.first;
    EXPECT_EQ(r.exit_code, 2) << var.first;
    EXPECT_NE(r.err.find(needle), std::string::npos) << var.first << " -> " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2)
        << "one line and the hint: " << r.err;
  }
  // A hostile value is escaped and clipped: still one line.
  const scoped_env hostile({{"TEC_WORKERS", "1\nforged line" + std::string(100000, 'x')}});
  const auto h = parse({});
  EXPECT_EQ(h.exit_code, 2);
  EXPECT_EQ(std::count(h.err.begin(), h.err.end(), '\n'), 2) << h.err;
  EXPECT_LT(h.err.size(), 1000U);
  EXPECT_NE(h.err.find("--workers (from TEC_WORKERS)"), std::string::npos) << h.err;
  // The same value on the command line names the flag only.
  const auto flag = parse({"--workers=0"});
  EXPECT_EQ(flag.err.find("(from"), std::string::npos) << flag.err;
  EXPECT_NE(flag.err.find("--workers must be between"), std::string::npos) << flag.err;
}

TEST(options_env, help_shows_each_setting_flag_s_variable_and_the_modes_have_none) {
  const scoped_env env({{"TEC_VERSION", "true"}, {"TEC_CHECK_POLICY", "/nonexistent"}});
  const auto r = parse({});
  ASSERT_TRUE(r.opts) << r.err;  // neither variable turns the daemon into a tool

  const auto h = parse({"--help"});
  ASSERT_EQ(h.exit_code, 0);
  std::istringstream lines(h.out);
  int flags = 0;
  for (std::string l; std::getline(lines, l);) {
    const auto dash = l.find("--");
    if (dash == std::string::npos || l.find_first_not_of(' ') != dash) {
      continue;  // not an option's line
    }
    std::string name = l.substr(dash + 2, l.find_first_of(" =", dash) - dash - 2);
    if (name == "help" || name == "version" || name == "check-policy") {
      EXPECT_EQ(l.find("(Env:"), std::string::npos) << l;
      continue;
    }
    std::string var = "TEC_";
    for (const char c : name) {
      var.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(c)));
    }
    EXPECT_NE(l.find("(Env:" + var + ")"), std::string::npos) << l;
    ++flags;
  }
  EXPECT_GE(flags, 30) << h.out;
}

TEST(HistoryRecord, HistorySizeFlag) {
  const auto parse_flags = [](std::vector<std::string> args) {
    return parse_options(
        args, "9.9.9", [](const std::string&) { return std::optional<std::string>(); },
        [](const std::string&) { return std::optional<std::string>(); });
  };
  auto r = parse_flags({});
  ASSERT_TRUE(r.opts) << r.err;
  EXPECT_EQ(r.opts->history_size, 1000);
  r = parse_flags({"--history-size=0"});
  ASSERT_TRUE(r.opts) << r.err;
  EXPECT_EQ(r.opts->history_size, 0);
  for (const std::string bad : {"--history-size=-1", "--history-size=100001"}) {
    r = parse_flags({bad});
    EXPECT_FALSE(r.opts) << bad;
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--history-size must be between 0 and 100000"), std::string::npos)
        << r.err;
  }
}

}  // namespace
}  // namespace tec::cmd
