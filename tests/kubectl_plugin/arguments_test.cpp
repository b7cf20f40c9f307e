#include "tec/kubectl_plugin/arguments.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tec::kubectl_plugin {
namespace {

parse_outcome parse(std::vector<std::string> args) {
  return parse_arguments(args);
}

// One line, "error: ...", exit 2.
void expect_usage_error(const parse_outcome& o, const std::string& contains) {
  EXPECT_FALSE(o.inv);
  EXPECT_EQ(o.exit_code, exit_usage);
  ASSERT_FALSE(o.err.empty());
  EXPECT_EQ(o.err.rfind("error: ", 0), 0U) << o.err;
  EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << o.err;
  EXPECT_NE(o.err.find(contains), std::string::npos) << o.err;
}

TEST(parse_taint, key_value_and_key_only) {
  auto t = parse_taint("dedicated=gpu:NoExecute");
  ASSERT_TRUE(t);
  EXPECT_EQ(t.value().key, "dedicated");
  EXPECT_EQ(t.value().value, "gpu");
  EXPECT_EQ(t.value().effect, controller::taint_effect::no_execute);
  t = parse_taint("example.com/maintenance:NoExecute");
  ASSERT_TRUE(t);
  EXPECT_EQ(t.value().key, "example.com/maintenance");
  EXPECT_EQ(t.value().value, "");
  t = parse_taint("k=:NoExecute");
  ASSERT_TRUE(t);
  EXPECT_EQ(t.value().value, "");
}

TEST(parse_taint, refuses_other_effects_missing_parts_and_bad_names) {
  for (const char* bad : {"a=b:NoSchedule", "a=b:PreferNoSchedule", "=x:NoExecute", "a=b",
                          "a=b:", ":NoExecute", "-a:NoExecute", "a b:NoExecute", "a=b c:NoExecute",
                          "Example.com/a:NoExecute", "/a:NoExecute", "a/:NoExecute"}) {
    const auto t = parse_taint(bad);
    EXPECT_FALSE(t) << bad;
    if (!t) {
      EXPECT_EQ(t.error().message.find('\n'), std::string::npos);
      EXPECT_NE(t.error().message.find("invalid taint spec"), std::string::npos);
    }
  }
  EXPECT_FALSE(parse_taint(std::string(64, 'a') + ":NoExecute"));
  EXPECT_TRUE(parse_taint(std::string(63, 'a') + ":NoExecute"));
  EXPECT_FALSE(parse_taint("k=" + std::string(64, 'v') + ":NoExecute"));
}

TEST(parse_taint, escapes_what_it_quotes) {
  const auto t = parse_taint("a\nb:NoExecute");
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().message.find('\n'), std::string::npos);
  EXPECT_NE(t.error().message.find("\\n"), std::string::npos);
}

TEST(parse_arguments, preview_with_nodes_and_global_flags_after_the_verb) {
  const auto o =
      parse({"preview", "node-1", "node-2", "node-1", "--taint", "a=b:NoExecute", "--kubeconfig",
             "/k", "--context", "c", "-o", "wide", "--policy", "p.yaml"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->what, verb::preview);
  EXPECT_EQ(o.inv->nodes, (std::vector<std::string>{"node-1", "node-2"}));
  EXPECT_EQ(o.inv->taint.key, "a");
  EXPECT_EQ(o.inv->cluster.kubeconfig, "/k");
  EXPECT_EQ(o.inv->cluster.context, "c");
  EXPECT_EQ(o.inv->output, output_format::wide);
  EXPECT_EQ(o.inv->policy_file, "p.yaml");
  EXPECT_EQ(o.inv->cluster.controller_namespace, "taint-eviction-controller");
  EXPECT_EQ(o.inv->cluster.policy_configmap, "taint-eviction-controller-policy");
}

TEST(parse_arguments, preview_with_a_selector) {
  const auto o = parse({"--kubeconfig=/k", "preview", "-l", "pool=gpu", "--taint", "a:NoExecute"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->node_selector, "pool=gpu");
  EXPECT_TRUE(o.inv->nodes.empty());
  EXPECT_EQ(o.inv->output, output_format::table);
}

TEST(parse_arguments, preview_usage_errors) {
  expect_usage_error(parse({"preview", "n1"}), "--taint");
  expect_usage_error(parse({"preview", "--taint", "a=b:NoExecute"}), "NODE");
  expect_usage_error(parse({"preview", "n1", "-l", "a=b", "--taint", "a=b:NoExecute"}), "NODE");
  expect_usage_error(parse({"preview", "n1", "--taint", "a=b:NoSchedule"}), "NoExecute");
  expect_usage_error(parse({"preview", "n1", "--taint", "=x:NoExecute"}), "invalid key");
  expect_usage_error(parse({"preview", "n1", "--taint", "a=b"}), "effect is missing");
  expect_usage_error(parse({"preview", "n1", "--taint", "a:NoExecute", "-o", "xml"}), "xml");
  expect_usage_error(parse({"preview", "N_1", "--taint", "a:NoExecute"}), "node name");
  expect_usage_error(parse({"preview", "n1", "--taint", "a:NoExecute", "--bogus"}), "bogus");
}

TEST(parse_arguments, verbs_and_help) {
  expect_usage_error(parse({}), "subcommand");
  expect_usage_error(parse({"delete"}), "unknown command \"delete\"");
  expect_usage_error(parse({"--context", "preview", "delete"}), "unknown command \"delete\"");
  auto o = parse({"-h"});
  EXPECT_FALSE(o.inv);
  EXPECT_EQ(o.exit_code, exit_ok);
  EXPECT_NE(o.out.find("preview"), std::string::npos);
  o = parse({"preview", "--help"});
  EXPECT_EQ(o.exit_code, exit_ok);
  EXPECT_NE(o.out.find("Read-only"), std::string::npos) << o.out;
}

TEST(parse_arguments, pending) {
  auto o = parse({"pending", "-A", "--node", "n1", "-o", "json"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->what, verb::pending);
  EXPECT_TRUE(o.inv->all_namespaces);
  EXPECT_EQ(o.inv->node, "n1");
  EXPECT_EQ(o.inv->output, output_format::json);
  o = parse({"pending", "-n", "shop"});
  ASSERT_TRUE(o.inv);
  EXPECT_EQ(o.inv->namespace_, "shop");
  expect_usage_error(parse({"pending", "-A", "-n", "shop"}), "-A and -n");
  expect_usage_error(parse({"pending", "-n", "Bad_NS"}), "namespace");
  expect_usage_error(parse({"pending", "--controller-url", "ftp://x"}), "--controller-url");
}

TEST(parse_arguments, shadow) {
  auto o = parse({"shadow"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->what, verb::shadow);
  EXPECT_EQ(o.inv->namespace_, "") << "every namespace by default";
  o = parse({"shadow", "-n", "shop", "-o", "wide"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->namespace_, "shop");
  EXPECT_EQ(o.inv->output, output_format::table);
  EXPECT_FALSE(o.inv->history);
  o = parse({"shadow", "--history", "-n", "shop", "-o", "yaml"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_TRUE(o.inv->history);
  EXPECT_EQ(o.inv->output, output_format::yaml);
  expect_usage_error(parse({"pending", "--history"}), "--history");
  expect_usage_error(parse({"shadow", "-n", "Bad_NS"}), "namespace");
  expect_usage_error(parse({"shadow", "web-0"}), "web-0");
  expect_usage_error(parse({"shadwo"}), "(preview, pending, explain or shadow)");
}

TEST(parse_arguments, explain) {
  auto o = parse({"explain", "web-0", "-n", "shop", "--request-timeout", "5"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->what, verb::explain);
  EXPECT_EQ(o.inv->pod, "web-0");
  EXPECT_EQ(o.inv->namespace_, "shop");
  EXPECT_EQ(o.inv->cluster.request_timeout, std::chrono::seconds{5});
  expect_usage_error(parse({"explain"}), "POD");
}

// kubectl's --request-timeout: a duration, a bare integer of seconds, 0 for none.
TEST(parse_arguments, request_timeout_as_kubectl_takes_it) {
  using std::chrono::milliseconds;
  const std::vector<std::pair<std::string, milliseconds>> good{
      {"30s", std::chrono::seconds{30}}, {"1m", std::chrono::minutes{1}},
      {"500ms", milliseconds{500}},      {"1m30s", std::chrono::seconds{90}},
      {"5", std::chrono::seconds{5}},    {"0", milliseconds{0}},
      {"0s", milliseconds{0}},           {"24h", std::chrono::hours{24}}};
  for (const auto& [text, want] : good) {
    auto o = parse({"pending", "--request-timeout", text});
    ASSERT_TRUE(o.inv) << text << ": " << o.err;
    EXPECT_EQ(o.inv->cluster.request_timeout, want) << text;
  }
  auto equals = parse({"pending", "--request-timeout=2m"});
  ASSERT_TRUE(equals.inv) << equals.err;
  EXPECT_EQ(equals.inv->cluster.request_timeout, std::chrono::minutes{2});
  EXPECT_EQ(equals.inv->cluster.request_wait(), std::chrono::minutes{2});
  auto none = parse({"pending", "--request-timeout", "0"});
  ASSERT_TRUE(none.inv);
  EXPECT_EQ(none.inv->cluster.request_wait(), std::chrono::hours{24});  // "none", bounded
  auto fallback = parse({"pending"});
  ASSERT_TRUE(fallback.inv);
  EXPECT_EQ(fallback.inv->cluster.request_timeout, std::chrono::seconds{30});
  for (const std::string bad : {"-1", "-5s", "soon", "5x", "25h", "1.5", ""}) {
    expect_usage_error(parse({"pending", "--request-timeout", bad}), "--request-timeout");
  }
}

}  // namespace
}  // namespace tec::kubectl_plugin
