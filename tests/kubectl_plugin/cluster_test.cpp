#include "tec/kubectl_plugin/cluster.hpp"

#include <gtest/gtest.h>

#include "tec/kubectl_plugin/controller_access.hpp"

namespace tec::kubectl_plugin {
namespace {

TEST(kubeconfig_path, flag_then_first_file_of_the_env_then_home) {
  EXPECT_EQ(kubeconfig_path("/f", std::string("/a:/b"), std::string("/h")), "/f");
  EXPECT_EQ(kubeconfig_path("", std::string("/a:/b"), std::string("/h")), "/a");
  EXPECT_EQ(kubeconfig_path("", std::string(""), std::string("/h")), "/h/.kube/config");
  EXPECT_EQ(kubeconfig_path("", std::nullopt, std::string("/h")), "/h/.kube/config");
}

TEST(decode_pdb_list, selectors_and_allowance) {
  const std::string body = R"({"items": [
    {"metadata": {"namespace": "shop", "name": "web"},
     "spec": {"selector": {"matchLabels": {"app": "web"},
                           "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}},
     "status": {"disruptionsAllowed": 1}},
    {"metadata": {"namespace": "shop", "name": "all"}, "spec": {"selector": {}},
     "status": {"disruptionsAllowed": 0}}]})";
  auto v1 = decode_pdb_list(body, true);
  ASSERT_TRUE(v1) << v1.error().message;
  ASSERT_EQ(v1.value().size(), 2U);
  const auto& web = v1.value()[0];
  EXPECT_EQ(web.name, "web");
  EXPECT_EQ(web.disruptions_allowed, 1);
  EXPECT_TRUE(covers(web, "shop", "app=web\ntier=a"));
  EXPECT_FALSE(covers(web, "shop", "app=web\ntier=b"));
  EXPECT_FALSE(covers(web, "other", "app=web\ntier=a"));
  // An empty selector: every pod of the namespace in policy/v1, none in policy/v1beta1.
  EXPECT_TRUE(covers(v1.value()[1], "shop", ""));
  auto beta = decode_pdb_list(body, false);
  ASSERT_TRUE(beta);
  EXPECT_FALSE(covers(beta.value()[1], "shop", ""));
}

TEST(decode_pdb_list, refuses_garbage) {
  EXPECT_FALSE(decode_pdb_list("{", true));
  EXPECT_FALSE(decode_pdb_list(
      R"({"items":[{"spec":{"selector":{"matchExpressions":[{"key":"a","operator":"Near"}]}}}]})",
      true));
}

TEST(decoders, configmap_lease_events) {
  auto v = decode_configmap_value(R"({"data": {"policy.yaml": "x: 1"}})", "policy.yaml");
  ASSERT_TRUE(v);
  EXPECT_EQ(v.value(), std::optional<std::string>("x: 1"));
  v = decode_configmap_value(R"({"data": {}})", "policy.yaml");
  ASSERT_TRUE(v);
  EXPECT_FALSE(v.value());
  auto h = decode_lease_holder(R"({"spec": {"holderIdentity": "tec-7d9-abc_0123"}})");
  ASSERT_TRUE(h);
  EXPECT_EQ(h.value(), "tec-7d9-abc_0123");
  auto e = decode_event_list(R"({"items": [{"metadata": {"namespace": "shop"},
    "involvedObject": {"name": "web-0", "uid": "u1"}, "message": "m",
    "lastTimestamp": "2026-11-28T03:07:12Z"}]})");
  ASSERT_TRUE(e);
  ASSERT_EQ(e.value().size(), 1U);
  EXPECT_EQ(e.value()[0].pod, "web-0");
  EXPECT_EQ(e.value()[0].pod_uid, "u1");
  EXPECT_EQ(e.value()[0].last_seen, "2026-11-28T03:07:12Z");
}

TEST(controller_access, holder_pod_and_forwarded_port) {
  EXPECT_EQ(holder_pod("taint-eviction-controller-5d8f-x2x_9f86d081884c7d65"),
            std::optional<std::string>("taint-eviction-controller-5d8f-x2x"));
  EXPECT_EQ(holder_pod("a_b_c"), std::optional<std::string>("a_b"));
  EXPECT_FALSE(holder_pod("nounderscore"));
  EXPECT_FALSE(holder_pod("_x"));
  EXPECT_EQ(forwarded_port("Forwarding from 127.0.0.1:43211 -> 8443"),
            std::optional<std::string>("43211"));
  EXPECT_FALSE(forwarded_port("Forwarding from [::1]:43211 -> 8443"));
  EXPECT_FALSE(forwarded_port("error: unable to forward port"));
  EXPECT_FALSE(forwarded_port("Forwarding from 127.0.0.1:4x -> 8443"));
}

}  // namespace
}  // namespace tec::kubectl_plugin
