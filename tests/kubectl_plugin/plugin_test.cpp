#include "tec/kubectl_plugin/plugin.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "tec/kubectl_plugin/arguments.hpp"

namespace tec::kubectl_plugin {
namespace {

struct ran {
  int code = 0;
  std::string out;
  std::string err;
};

ran run_with(const std::vector<std::string>& args, std::optional<std::string> kubeconfig_env) {
  std::ostringstream out;
  std::ostringstream err;
  ran r;
  r.code = run(args, out, err, [&](const std::string& name) -> std::optional<std::string> {
    if (name == "KUBECONFIG") {
      return kubeconfig_env;
    }
    if (name == "HOME") {
      return std::string("/nonexistent-home");
    }
    return std::nullopt;
  });
  r.out = out.str();
  r.err = err.str();
  return r;
}

TEST(run, help_is_exit_0_on_stdout) {
  const auto r = run_with({"--help"}, std::nullopt);
  EXPECT_EQ(r.code, exit_ok);
  EXPECT_NE(r.out.find("preview"), std::string::npos);
  EXPECT_TRUE(r.err.empty());
}

TEST(run, bad_usage_is_exit_2_and_one_line) {
  const auto r = run_with({"preview", "n1", "--taint", "a=b:NoSchedule"}, std::nullopt);
  EXPECT_EQ(r.code, exit_usage);
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(r.err.rfind("error: invalid taint spec", 0), 0U) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1);
}

TEST(run, a_missing_kubeconfig_is_exit_1_and_one_line_naming_it) {
  // $KUBECONFIG's first file, as kubectl reads it.
  const auto r = run_with({"preview", "n1", "--taint", "a:NoExecute"},
                          std::string("/nonexistent/kubeconfig:/other"));
  EXPECT_EQ(r.code, exit_cluster_error);
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(r.err.rfind("error: ", 0), 0U) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/kubeconfig"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  // Without $KUBECONFIG: ~/.kube/config.
  const auto home = run_with({"pending"}, std::nullopt);
  EXPECT_EQ(home.code, exit_cluster_error);
  EXPECT_NE(home.err.find("/nonexistent-home/.kube/config"), std::string::npos) << home.err;
}

}  // namespace
}  // namespace tec::kubectl_plugin
