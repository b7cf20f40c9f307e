#include "tec/informers/decode.hpp"

#include "informers/support/watch_decoder.hpp"
#include "support/informers_reference.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace tec::informers {
namespace {

namespace fs = std::filesystem;
using controller::pod_phase;
using controller::taint_effect;
using controller::toleration_operator;

std::string fixture(const std::string& name) {
  const fs::path p = fs::path(TEC_SOURCE_DIR) / "tests" / "informers" / "testdata" / name;
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// One watch line `{"type": type, "object": <fixture, compacted>}`.
std::string event_line(const std::string& type, const std::string& object_json) {
  return R"({"type":")" + type + R"(","object":)" + nlohmann::json::parse(object_json).dump() + "}";
}

void expect_shape_error(const error& err, const std::string& fragment) {
  EXPECT_EQ(err.code, make_error_code(errc::unexpected_shape)) << err.message;
  EXPECT_NE(err.message.find(fragment), std::string::npos)
      << "message: " << err.message << "\nwanted: " << fragment;
}

TEST(decode_pod, realistic_fixture) {
  auto pod = decode_pod(fixture("pod.json"));
  ASSERT_TRUE(pod) << pod.error().message;
  const auto& v = pod->pod;
  EXPECT_EQ(v.namespace_, "shop");
  EXPECT_EQ(v.name, "web-7d4b9c8f6d-x2k9p");
  EXPECT_EQ(v.uid, "0f9a3c1e-5b2d-4e8f-9a61-3c7d2e1f4b58");
  EXPECT_EQ(v.node_name, "ip-10-0-1-23.ec2.internal");
  EXPECT_EQ(v.phase, pod_phase::running);
  EXPECT_FALSE(v.terminating);
  EXPECT_FALSE(v.mirror);
  EXPECT_EQ(v.owner_kind, "ReplicaSet");
  EXPECT_EQ(pod->resource_version, "184467");
  ASSERT_EQ(v.tolerations.size(), 3U);
  EXPECT_EQ(v.tolerations[0],
            (controller::toleration{"node.kubernetes.io/not-ready", toleration_operator::exists, "",
                                    taint_effect::no_execute, 300}));
  EXPECT_EQ(v.tolerations[1],
            (controller::toleration{"node.kubernetes.io/unreachable", toleration_operator::exists,
                                    "", taint_effect::no_execute, 300}));
  EXPECT_EQ(v.tolerations[2],
            (controller::toleration{"dedicated", toleration_operator::equal, "web",
                                    taint_effect::no_schedule, std::nullopt}));
  EXPECT_EQ(pod->disruption, disruption_state::absent);  // Initialized and Ready only
}

/// A pod whose status.conditions is `conditions` (a JSON array).
std::string pod_with_conditions(const std::string& conditions) {
  return R"({"metadata":{"name":"p","uid":"u"},"status":{"phase":"Running","conditions":)" +
         conditions + "}}";
}

TEST(decode_pod, disruption_target_condition) {
  const std::string ours =
      R"({"type":"DisruptionTarget","status":"True","reason":"DeletionByTaintManager",)"
      R"("message":"Taint manager: deleting due to NoExecute taint",)"
      R"("lastTransitionTime":"2024-05-01T12:00:00Z","lastProbeTime":null})";
  const std::string ready = R"({"type":"Ready","status":"True","reason":"x","message":"y"})";
  const std::vector<std::pair<std::string, disruption_state>> cases{
      {"[]", disruption_state::absent},
      {"null", disruption_state::absent},
      {"[" + ready + "]", disruption_state::absent},
      {"[" + ready + "," + ours + "]", disruption_state::true_ours},
      // Keys in any order.
      {R"([{"message":"Taint manager: deleting due to NoExecute taint","status":"True",)"
       R"("reason":"DeletionByTaintManager","type":"DisruptionTarget"}])",
       disruption_state::true_ours},
      {R"([{"type":"DisruptionTarget","status":"True","reason":"PreemptionByScheduler",)"
       R"("message":"Taint manager: deleting due to NoExecute taint"}])",
       disruption_state::true_other},
      {R"([{"type":"DisruptionTarget","status":"True","reason":"DeletionByTaintManager",)"
       R"("message":"another message"}])",
       disruption_state::true_other},
      {R"([{"type":"DisruptionTarget","status":"True"}])", disruption_state::true_other},
      // The DRA device taint eviction controller's (KEP-5055): not ours, not the taint manager's.
      {R"([{"type":"DisruptionTarget","status":"True","reason":"DeletionByDeviceTaintManager",)"
       R"("message":"Device Taint manager: deleting due to NoExecute taint"}])",
       disruption_state::true_other},
      {R"([{"type":"DisruptionTarget","status":"False","reason":"DeletionByTaintManager",)"
       R"("message":"Taint manager: deleting due to NoExecute taint"}])",
       disruption_state::not_true},
      {R"([{"type":"DisruptionTarget","status":"Unknown"}])", disruption_state::not_true},
      {R"([{"type":"DisruptionTarget"}])", disruption_state::not_true},
      // The first DisruptionTarget condition counts, as upstream's GetPodCondition.
      {R"([{"type":"DisruptionTarget","status":"False"},)" + ours + "]",
       disruption_state::not_true},
      // Another condition's fields never leak into it.
      {R"([{"type":"Ready","status":"True","reason":"DeletionByTaintManager",)"
       R"("message":"Taint manager: deleting due to NoExecute taint"},)"
       R"({"type":"DisruptionTarget","status":"True"}])",
       disruption_state::true_other},
  };
  for (const auto& [conditions, expected] : cases) {
    const std::string json = pod_with_conditions(conditions);
    for (const auto decode : {&decode_pod, &reference::decode_pod}) {
      auto pod = decode(json);
      ASSERT_TRUE(pod) << pod.error().message << "\n" << json;
      EXPECT_EQ(pod->disruption, expected) << json;
      EXPECT_EQ(pod->pod.phase, pod_phase::running);
    }
  }
  // In a list and in a watch event too.
  auto page = decode_pod_list(R"({"metadata":{"resourceVersion":"5"},"items":[)" +
                              pod_with_conditions("[" + ours + "]") + "," +
                              pod_with_conditions("[]") + "]}");
  ASSERT_TRUE(page) << page.error().message;
  ASSERT_EQ(page->items.size(), 2U);
  EXPECT_EQ(page->items[0].disruption, disruption_state::true_ours);
  EXPECT_EQ(page->items[1].disruption, disruption_state::absent);
  auto event = decode_pod_event(event_line("MODIFIED", pod_with_conditions("[" + ours + "]")));
  ASSERT_TRUE(event) << event.error().message;
  EXPECT_EQ(event->object.disruption, disruption_state::true_ours);
}

TEST(decode_pod, bind_time) {
  // 2024-05-01T12:00:00Z and 12:00:07Z.
  constexpr std::int64_t created = 1714564800;
  constexpr std::int64_t scheduled = 1714564807;
  const std::string sched = R"({"type":"PodScheduled","status":"True",)"
                            R"("lastTransitionTime":"2024-05-01T12:00:07Z"})";
  const auto with = [](const std::string& metadata_extra, const std::string& conditions) {
    return R"({"metadata":{"name":"p","uid":"u")" + metadata_extra +
           R"(},"status":{"phase":"Running","conditions":)" + conditions + "}}";
  };
  const std::string created_at = R"(,"creationTimestamp":"2024-05-01T12:00:00Z")";
  const std::vector<std::pair<std::string, std::int64_t>> cases{
      {with("", "[]"), 0},
      {with(created_at, "[]"), created},
      {with(created_at, "[" + sched + "]"), scheduled},
      {with("", "[" + sched + "]"), scheduled},
      // The condition wins in any order: status before metadata.
      {R"({"status":{"conditions":[)" + sched +
           R"(]},"metadata":{"name":"p","uid":"u","creationTimestamp":"2024-05-01T12:00:00Z"}})",
       scheduled},
      // Not True, or another type: the creation time.
      {with(created_at, R"([{"type":"PodScheduled","status":"False",)"
                        R"("lastTransitionTime":"2024-05-01T12:00:07Z"}])"),
       created},
      {with(created_at, R"([{"type":"Ready","status":"True",)"
                        R"("lastTransitionTime":"2024-05-01T12:00:07Z"}])"),
       created},
      // A time that does not parse is ignored, never an error.
      {with(R"(,"creationTimestamp":"yesterday")", "[]"), 0},
      {with(created_at, R"([{"type":"PodScheduled","status":"True",)"
                        R"("lastTransitionTime":"soon"}])"),
       created},
  };
  for (const auto& [json, expected] : cases) {
    for (const auto decode : {&decode_pod, &reference::decode_pod}) {
      auto pod = decode(json);
      ASSERT_TRUE(pod) << pod.error().message << "\n" << json;
      EXPECT_EQ(pod->pod.bound_unix, expected) << json;
    }
  }
  // Each item of a list has its own.
  auto page = decode_pod_list(R"({"metadata":{"resourceVersion":"5"},"items":[)" +
                              with(created_at, "[" + sched + "]") + "," + with("", "[]") + "]}");
  ASSERT_TRUE(page) << page.error().message;
  ASSERT_EQ(page->items.size(), 2U);
  EXPECT_EQ(page->items[0].pod.bound_unix, scheduled);
  EXPECT_EQ(page->items[1].pod.bound_unix, 0);
  // The realistic fixture has a creationTimestamp and no PodScheduled condition.
  auto fixture_pod = decode_pod(fixture("pod.json"));
  ASSERT_TRUE(fixture_pod) << fixture_pod.error().message;
  EXPECT_EQ(fixture_pod->pod.bound_unix, created);
}

TEST(decode_pod, opt_out_annotation_and_labels) {
  const std::string json = R"({"metadata":{"name":"p","uid":"u","labels":{"app":"web","tier":""},)"
                           R"("annotations":{"taint-eviction-controller/exclude":"true",)"
                           R"("kubernetes.io/config.mirror":"x"}}})";
  const std::string other =
      R"({"metadata":{"name":"p","uid":"u","annotations":{"taint-eviction-controller/exclude":"True"}}})";
  const std::string bad_label = R"({"metadata":{"name":"p","uid":"u","labels":{"app":5}}})";
  for (const auto decode : {&decode_pod, &reference::decode_pod}) {
    keep_pod_labels(false);
    auto pod = decode(json);
    ASSERT_TRUE(pod) << pod.error().message;
    EXPECT_TRUE(pod->pod.opted_out);
    EXPECT_TRUE(pod->pod.mirror);
    EXPECT_EQ(pod->pod.labels, "") << "labels are not kept unless asked for";
    EXPECT_TRUE(decode(bad_label)) << "nor read";
    auto not_true = decode(other);
    ASSERT_TRUE(not_true);
    EXPECT_FALSE(not_true->pod.opted_out) << "only the exact value \"true\" opts out";

    keep_pod_labels(true);
    pod = decode(json);
    ASSERT_TRUE(pod) << pod.error().message;
    EXPECT_EQ(pod->pod.labels, "app=web\ntier=");
    auto bad = decode(bad_label);
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("metadata.labels"), std::string::npos)
        << bad.error().message;
    keep_pod_labels(false);
  }
}

TEST(decode_pod, hold_annotation) {
  const std::string json = R"({"metadata":{"name":"p","uid":"u","annotations":{"a":"b",)"
                           R"("taint-eviction-controller/hold-until":"2023-11-14T22:14:20Z"}}})";
  const std::string bad = R"({"metadata":{"name":"p","uid":"u","annotations":{)"
                          R"("taint-eviction-controller/hold-until":"next week"}}})";
  const std::string not_string = R"({"metadata":{"name":"p","uid":"u","annotations":{)"
                                 R"("taint-eviction-controller/hold-until":5}}})";
  for (const auto decode : {&decode_pod, &reference::decode_pod}) {
    auto pod = decode(json);
    ASSERT_TRUE(pod) << pod.error().message;
    ASSERT_TRUE(pod->pod.hold);
    EXPECT_EQ(pod->pod.hold->until_unix, 1'700'000'060);
    auto malformed = decode(bad);
    ASSERT_TRUE(malformed) << malformed.error().message;
    ASSERT_TRUE(malformed->pod.hold);
    EXPECT_TRUE(malformed->pod.hold->malformed());
    EXPECT_EQ(malformed->pod.hold->value, "next week");
    EXPECT_FALSE(decode(not_string));
    EXPECT_FALSE(decode(R"({"metadata":{"name":"p","uid":"u"}})")->pod.hold);
  }
}

TEST(decode_node, hold_annotation) {
  const std::string json =
      R"({"metadata":{"name":"n","annotations":{"x":"y",)"
      R"("taint-eviction-controller/hold-until":"2023-11-14T22:14:20Z"}},"spec":{}})";
  for (const auto decode : {&decode_node, &reference::decode_node}) {
    auto node = decode(json);
    ASSERT_TRUE(node) << node.error().message;
    ASSERT_TRUE(node->node.hold);
    EXPECT_EQ(node->node.hold->until_unix, 1'700'000'060);
    EXPECT_FALSE(decode(R"({"metadata":{"name":"n","annotations":{"x":"y"}}})")->node.hold);
    EXPECT_FALSE(decode(R"({"metadata":{"name":"n","annotations":[]}})"));
  }
}

TEST(decode_pod, malformed_conditions_name_the_path) {
  expect_shape_error(decode_pod(pod_with_conditions("{}")).error(),
                     "status.conditions: expected an array");
  expect_shape_error(decode_pod(pod_with_conditions("[1]")).error(), "status.conditions[0]");
  expect_shape_error(
      decode_pod(pod_with_conditions(R"([{"type":"DisruptionTarget","status":{}}])")).error(),
      "status.conditions[0].status: expected a string");
  expect_shape_error(decode_pod(pod_with_conditions(R"([{"type":"Ready","reason":7}])")).error(),
                     "status.conditions[0].reason: expected a string");
}

TEST(decode_node, realistic_fixture) {
  auto node = decode_node(fixture("node.json"));
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ(node->node.name, "ip-10-0-1-23.ec2.internal");
  EXPECT_EQ(node->resource_version, "184470");
  ASSERT_EQ(node->node.taints.size(), 3U);
  EXPECT_EQ(node->node.taints[0], (controller::taint{"node.kubernetes.io/unreachable", "",
                                                     taint_effect::no_execute, 1714566896}));
  EXPECT_EQ(node->node.taints[1], (controller::taint{"node.kubernetes.io/unreachable", "",
                                                     taint_effect::no_schedule, 1714566895}));
  EXPECT_EQ(node->node.taints[2],
            (controller::taint{"dedicated", "web", taint_effect::no_schedule, 0}));
}

TEST(decode_pod_list, page_with_continue) {
  auto page = decode_pod_list(fixture("pod_list_page.json"));
  ASSERT_TRUE(page) << page.error().message;
  EXPECT_EQ(page->resource_version, "200100");
  EXPECT_EQ(page->continue_token,
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjAwMTAwLCJzdGFydCI6ImRlZmF1bHQvYlx1MDAwMCJ9");
  ASSERT_EQ(page->items.size(), 3U);

  const auto& a = page->items[0];
  EXPECT_EQ(a.pod.name, "a");
  EXPECT_EQ(a.pod.namespace_, "default");
  EXPECT_EQ(a.pod.node_name, "node-1");
  EXPECT_EQ(a.pod.phase, pod_phase::pending);
  EXPECT_TRUE(a.pod.tolerations.empty());
  EXPECT_EQ(a.resource_version, "100");

  const auto& b = page->items[1];
  EXPECT_TRUE(b.pod.terminating);
  EXPECT_TRUE(b.pod.mirror);
  EXPECT_EQ(b.pod.owner_kind, "");  // an owner reference, but not a controller
  ASSERT_EQ(b.pod.tolerations.size(), 1U);
  EXPECT_EQ(b.pod.tolerations[0], (controller::toleration{"", toleration_operator::exists, "",
                                                          std::nullopt, std::nullopt}));

  const auto& c = page->items[2];
  EXPECT_EQ(c.pod.namespace_, "kube-system");
  EXPECT_EQ(c.pod.owner_kind, "DaemonSet");  // the first controller reference
  EXPECT_EQ(c.pod.phase, pod_phase::succeeded);
  ASSERT_EQ(c.pod.tolerations.size(), 3U);
  EXPECT_EQ(c.pod.tolerations[0].seconds, std::nullopt);
  EXPECT_EQ(c.pod.tolerations[1].op, toleration_operator::lt);
  EXPECT_EQ(c.pod.tolerations[1].seconds, -10);
  EXPECT_EQ(c.pod.tolerations[2].op, toleration_operator::unknown);
  EXPECT_EQ(c.pod.tolerations[2].effect, std::nullopt);
}

TEST(decode_pod_list, empty_and_null_items) {
  auto empty =
      decode_pod_list(R"({"kind":"PodList","metadata":{"resourceVersion":"5"},"items":[]})");
  ASSERT_TRUE(empty) << empty.error().message;
  EXPECT_TRUE(empty->items.empty());
  EXPECT_EQ(empty->resource_version, "5");
  EXPECT_EQ(empty->continue_token, "");
  auto null_items = decode_pod_list(R"({"metadata":{"resourceVersion":"6"},"items":null})");
  ASSERT_TRUE(null_items) << null_items.error().message;
  EXPECT_TRUE(null_items->items.empty());
}

TEST(decode_node_list, nodes) {
  const std::string body = R"({"kind":"NodeList","metadata":{"resourceVersion":"9"},"items":[)" +
                           nlohmann::json::parse(fixture("node.json")).dump() +
                           R"(,{"metadata":{"name":"n2","uid":"u2"},"spec":{}}]})";
  auto page = decode_node_list(body);
  ASSERT_TRUE(page) << page.error().message;
  ASSERT_EQ(page->items.size(), 2U);
  EXPECT_EQ(page->items[0].node.taints.size(), 3U);
  EXPECT_EQ(page->items[1].node.name, "n2");
  EXPECT_TRUE(page->items[1].node.taints.empty());
}

TEST(decode_pod_event, added_modified_deleted) {
  for (const auto& [text, type] :
       {std::pair{"ADDED", event_type::added}, std::pair{"MODIFIED", event_type::modified},
        std::pair{"DELETED", event_type::deleted}}) {
    auto event = decode_pod_event(event_line(text, fixture("pod.json")));
    ASSERT_TRUE(event) << event.error().message;
    EXPECT_EQ(event->type, type);
    EXPECT_EQ(to_string(event->type), text);
    EXPECT_EQ(event->object.pod.name, "web-7d4b9c8f6d-x2k9p");
    EXPECT_EQ(event->object.pod.tolerations.size(), 3U);
    EXPECT_EQ(event->resource_version(), "184467");
  }
}

TEST(decode_pod_event, type_after_object) {
  auto event = decode_pod_event(
      R"({"object":{"metadata":{"name":"p","namespace":"n","uid":"u","resourceVersion":"7"}},"type":"MODIFIED"})");
  ASSERT_TRUE(event) << event.error().message;
  EXPECT_EQ(event->type, event_type::modified);
  EXPECT_EQ(event->object.pod.name, "p");
}

TEST(decode_pod_event, in_stream_error_410) {
  auto event = decode_pod_event(fixture("watch_error_410.json"));
  ASSERT_TRUE(event) << event.error().message;
  EXPECT_EQ(event->type, event_type::error);
  EXPECT_EQ(event->status.code, 410);
  EXPECT_EQ(event->status.reason, "Expired");
  EXPECT_EQ(event->status.status, "Failure");
  EXPECT_EQ(event->status.message, "too old resource version: 1 (184467)");
  auto node_event = decode_node_event(fixture("watch_error_410.json"));
  ASSERT_TRUE(node_event) << node_event.error().message;
  EXPECT_EQ(node_event->status.code, 410);
}

TEST(decode_pod_event, bookmark) {
  auto event = decode_pod_event(fixture("watch_bookmark.json"));
  ASSERT_TRUE(event) << event.error().message;
  EXPECT_EQ(event->type, event_type::bookmark);
  EXPECT_EQ(event->resource_version(), "184999");
  auto no_rv = decode_pod_event(R"({"type":"BOOKMARK","object":{"metadata":{}}})");
  ASSERT_FALSE(no_rv);
  expect_shape_error(no_rv.error(), "object.metadata.resourceVersion: missing");
}

TEST(decode_node_event, node_modified) {
  auto event = decode_node_event(event_line("MODIFIED", fixture("node.json")));
  ASSERT_TRUE(event) << event.error().message;
  EXPECT_EQ(event->object.node.taints.size(), 3U);
  EXPECT_EQ(event->resource_version(), "184470");
}

TEST(decode_pod_event, bad_event_envelopes) {
  auto no_type = decode_pod_event(R"({"object":{"metadata":{"name":"p","uid":"u"}}})");
  ASSERT_FALSE(no_type);
  expect_shape_error(no_type.error(), "type: missing");
  auto weird = decode_pod_event(R"({"type":"EXPLODED","object":{}})");
  ASSERT_FALSE(weird);
  expect_shape_error(weird.error(), "unknown watch event type \"EXPLODED\"");
  auto no_object = decode_pod_event(R"({"type":"ADDED"})");
  ASSERT_FALSE(no_object);
  expect_shape_error(no_object.error(), "object: missing");
  auto no_uid = decode_pod_event(R"({"type":"ADDED","object":{"metadata":{"name":"p"}}})");
  ASSERT_FALSE(no_uid);
  expect_shape_error(no_uid.error(), "object.metadata.uid: missing");
  auto no_name = decode_pod_event(R"({"type":"DELETED","object":{"metadata":{"uid":"u"}}})");
  ASSERT_FALSE(no_name);
  expect_shape_error(no_name.error(), "object.metadata.name: missing");
  auto type_number = decode_pod_event(R"({"type":3,"object":{}})");
  ASSERT_FALSE(type_number);
  expect_shape_error(type_number.error(), "type: expected a string, got a number");
}

TEST(decode, malformed_json) {
  for (const char* bad :
       {"", "{", "{\"type\":", "not json", "{\"type\":\"ADDED\"} trailing", "{\"a\":1,}",
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"p", "\xff\xfe",
        "{\"type\":\"ADD\x01"
        "ED\"}"}) {
    auto event = decode_pod_event(bad);
    ASSERT_FALSE(event) << bad;
    EXPECT_EQ(event.error().code, make_error_code(errc::malformed_json)) << event.error().message;
    EXPECT_NE(event.error().message.find("malformed JSON"), std::string::npos);
  }
  auto list = decode_pod_list(R"({"items":[{"metadata":{"name":"a","uid":"u"}},)");
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().code, make_error_code(errc::malformed_json));
}

TEST(decode, wrong_types_name_the_path) {
  auto spec_array = decode_pod(R"({"metadata":{"name":"p","uid":"u"},"spec":[]})");
  ASSERT_FALSE(spec_array);
  expect_shape_error(spec_array.error(), "spec: expected an object, got an array");

  auto tolerations_object =
      decode_pod(R"({"metadata":{"name":"p","uid":"u"},"spec":{"tolerations":{}}})");
  ASSERT_FALSE(tolerations_object);
  expect_shape_error(tolerations_object.error(),
                     "spec.tolerations: expected an array, got an object");

  auto seconds_string = decode_pod_list(
      R"({"items":[{"metadata":{"name":"a","uid":"u"}},{"metadata":{"name":"b","namespace":"ns","uid":"v"},"spec":{"tolerations":[{"key":"k"},{"tolerationSeconds":"300"}]}}]})");
  ASSERT_FALSE(seconds_string);
  expect_shape_error(seconds_string.error(),
                     "items[1].spec.tolerations[1].tolerationSeconds: expected an integer, got a "
                     "string");
  EXPECT_NE(seconds_string.error().message.find("(pod ns/b)"), std::string::npos);

  auto name_number = decode_pod(R"({"metadata":{"name":5,"uid":"u"}})");
  ASSERT_FALSE(name_number);
  expect_shape_error(name_number.error(), "metadata.name: expected a string, got a number");

  auto element_string = decode_pod_list(R"({"items":["pod"]})");
  ASSERT_FALSE(element_string);
  expect_shape_error(element_string.error(), "items[0]: expected an object, got a string");

  auto toleration_null =
      decode_pod(R"({"metadata":{"name":"p","uid":"u"},"spec":{"tolerations":[null]}})");
  ASSERT_FALSE(toleration_null);
  expect_shape_error(toleration_null.error(), "spec.tolerations[0]: expected an object, got null");

  auto root_array = decode_pod_list("[1,2]");
  ASSERT_FALSE(root_array);
  expect_shape_error(root_array.error(), "expected a JSON object, got an array");

  auto controller_string = decode_pod(
      R"({"metadata":{"name":"p","uid":"u","ownerReferences":[{"kind":"X","controller":"true"}]}})");
  ASSERT_FALSE(controller_string);
  expect_shape_error(controller_string.error(),
                     "metadata.ownerReferences[0].controller: expected a boolean, got a string");

  auto taint_time = decode_node(
      R"({"metadata":{"name":"n","uid":"u"},"spec":{"taints":[{"key":"k","effect":"NoExecute","timeAdded":"yesterday"}]}})");
  ASSERT_FALSE(taint_time);
  expect_shape_error(taint_time.error(), "spec.taints[0].timeAdded: not an RFC 3339 time");
  EXPECT_NE(taint_time.error().message.find("(node n)"), std::string::npos);
}

TEST(decode, missing_required_fields_in_lists) {
  auto list = decode_pod_list(
      R"({"items":[{"metadata":{"name":"a","uid":"u"}},{"metadata":{"name":"b"}}]})");
  ASSERT_FALSE(list);
  expect_shape_error(list.error(), "items[1].metadata.uid: missing");
  auto nodes = decode_node_list(R"({"items":[{"metadata":{"uid":"u"}}]})");
  ASSERT_FALSE(nodes);
  expect_shape_error(nodes.error(), "items[0].metadata.name: missing");
}

// Nothing reads a node's uid (the controller keys nodes by name), so it is neither kept nor
// required: a node without one, or with one of another type, decodes.
TEST(decode, node_uid_is_not_read) {
  for (const char* json :
       {R"({"metadata":{"name":"n"}})", R"({"metadata":{"name":"n","uid":5}})"}) {
    auto node = decode_node(json);
    ASSERT_TRUE(node) << json << ": " << node.error().message;
    EXPECT_EQ(node->node.name, "n");
  }
}

TEST(decode, absurd_toleration_seconds_are_errors) {
  for (const char* value :
       {"1e30", "1.5", "300.0", "18446744073709551615", "9223372036854775808"}) {
    const std::string json =
        std::string(
            R"({"metadata":{"name":"p","uid":"u"},"spec":{"tolerations":[{"key":"k","tolerationSeconds":)") +
        value + "}]}}";
    auto pod = decode_pod(json);
    ASSERT_FALSE(pod) << value;
    expect_shape_error(pod.error(), "spec.tolerations[0].tolerationSeconds");
  }
  for (const auto& [text, expected] :
       {std::pair{"9223372036854775807", std::numeric_limits<std::int64_t>::max()},
        std::pair{"-9223372036854775808", std::numeric_limits<std::int64_t>::min()},
        std::pair{"0", std::int64_t{0}}}) {
    const std::string json =
        std::string(
            R"({"metadata":{"name":"p","uid":"u"},"spec":{"tolerations":[{"key":"k","tolerationSeconds":)") +
        text + "}]}}";
    auto pod = decode_pod(json);
    ASSERT_TRUE(pod) << pod.error().message;
    EXPECT_EQ(pod->pod.tolerations.at(0).seconds, expected);
  }
}

/// `levels` nested arrays.
std::string nested_arrays(int levels) {
  return std::string(static_cast<std::size_t>(levels), '[') +
         std::string(static_cast<std::size_t>(levels), ']');
}

TEST(decode, unknown_fields_and_deep_nesting_are_skipped) {
  // 2 + 1022 = 1024 levels: the deepest accepted.
  const std::string deep = nested_arrays(1022);
  const std::string json =
      R"({"zzz":{"metadata":{"name":"evil"}},"metadata":{"extra":)" + deep +
      R"(,"name":"p","uid":"u","labels":{"name":"x"}},"spec":{"nodeName":"n",)"
      R"("unknown":[1,2.5,true,null,{"tolerations":"no"}]},"status":{"phase":"Weird","x":{}}})";
  auto pod = decode_pod(json);
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_EQ(pod->pod.name, "p");
  EXPECT_EQ(pod->pod.node_name, "n");
  EXPECT_EQ(pod->pod.phase, pod_phase::unknown);
}

TEST(decode, nesting_deeper_than_1024_levels_is_malformed) {
  for (const auto decode : {&decode_pod, &reference::decode_pod}) {
    const auto pod =
        decode(R"({"metadata":{"name":"p","uid":"u","extra":)" + nested_arrays(1023) + "}}");
    ASSERT_FALSE(pod);
    EXPECT_EQ(pod.error().code, make_error_code(errc::malformed_json)) << pod.error().message;
    EXPECT_TRUE(
        decode(R"({"metadata":{"name":"p","uid":"u","extra":)" + nested_arrays(1022) + "}}"));
  }
}

TEST(decode, nulls_mean_absent) {
  auto pod = decode_pod(
      R"({"metadata":{"name":"p","uid":"u","namespace":null,"deletionTimestamp":null,"annotations":null,"ownerReferences":null},"spec":{"nodeName":null,"tolerations":[{"key":"k","effect":null,"tolerationSeconds":null}]},"status":null})");
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_FALSE(pod->pod.terminating);
  EXPECT_EQ(pod->pod.node_name, "");
  ASSERT_EQ(pod->pod.tolerations.size(), 1U);
  EXPECT_EQ(pod->pod.tolerations[0].effect, std::nullopt);
  EXPECT_EQ(pod->pod.tolerations[0].seconds, std::nullopt);
  auto node = decode_node(
      R"({"metadata":{"name":"n","uid":"u"},"spec":{"taints":[{"key":"k","effect":"NoExecute","timeAdded":null}]}})");
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ(node->node.taints.at(0).time_added_unix, 0);
}

TEST(decode, effects_and_unicode_escapes) {
  auto node = decode_node(
      R"({"metadata":{"name":"n\u00e9","uid":"u"},"spec":{"taints":[{"key":"a","effect":"PreferNoSchedule"},{"key":"b","effect":"Sometimes"},{"key":"c"}]}})");
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ(node->node.name, "n\xc3\xa9");
  EXPECT_EQ(node->node.taints.at(0).effect, taint_effect::prefer_no_schedule);
  EXPECT_EQ(node->node.taints.at(1).effect, taint_effect::unknown);
  EXPECT_EQ(node->node.taints.at(2).effect, taint_effect::unknown);
}

TEST(decode_status, status_body) {
  auto status = decode_status(
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"The provided continue parameter is too old","reason":"Expired","code":410})");
  ASSERT_TRUE(status) << status.error().message;
  EXPECT_EQ(status->code, 410);
  EXPECT_EQ(status->reason, "Expired");
  auto bad_code = decode_status(R"({"code":1e3})");
  ASSERT_FALSE(bad_code);
  expect_shape_error(bad_code.error(), "code: expected an integer");
  EXPECT_FALSE(decode_status("nope"));
}

}  // namespace
}  // namespace tec::informers

namespace tec::informers {
namespace {

template <class T, class Eq>
void expect_same(const result<T>& fast, const result<T>& reference, Eq&& eq,
                 const std::string& input) {
  ASSERT_EQ(fast.has_value(), reference.has_value())
      << "input: " << input << "\nfast: " << (fast ? "ok" : fast.error().message)
      << "\nnlohmann: " << (reference ? "ok" : reference.error().message);
  if (fast) {
    EXPECT_TRUE(eq(fast.value(), reference.value())) << "input: " << input;
  } else {
    EXPECT_EQ(fast.error().code, reference.error().code)
        << "input: " << input << "\nfast: " << fast.error().message
        << "\nnlohmann: " << reference.error().message;
  }
}

void compare_engines(const std::string& input) {
  const auto same = [](const auto& a, const auto& b) { return a == b; };
  const auto same_event = [](const auto& a, const auto& b) {
    return a.type == b.type && a.object == b.object && a.status == b.status;
  };
  const auto same_page = [](const auto& a, const auto& b) {
    return a.items == b.items && a.resource_version == b.resource_version &&
           a.continue_token == b.continue_token;
  };
  expect_same(decode_pod_event(input), reference::decode_pod_event(input), same_event, input);
  expect_same(decode_node_event(input), reference::decode_node_event(input), same_event, input);
  expect_same(decode_pod_list(input), reference::decode_pod_list(input), same_page, input);
  expect_same(decode_node_list(input), reference::decode_node_list(input), same_page, input);
  expect_same(decode_pod(input), reference::decode_pod(input), same, input);
  expect_same(decode_node(input), reference::decode_node(input), same, input);
  expect_same(decode_status(input), reference::decode_status(input), same, input);
}

/// simdjson must accept and reject what nlohmann's strict parser does (but huge integers),
/// and the field mapping fed by either DOM must decode the same records: checked on the
/// fixtures and on thousands of random mutations.
TEST(decode_engines, agree_on_fixtures_and_mutations) {
  std::vector<std::string> seeds{
      fixture("pod.json"),
      pod_with_conditions(
          R"([{"type":"Ready","status":"True"},{"type":"DisruptionTarget","status":"True",)"
          R"("reason":"DeletionByTaintManager",)"
          R"("message":"Taint manager: deleting due to NoExecute taint"}])"),
      fixture("node.json"),
      fixture("pod_list_page.json"),
      fixture("watch_error_410.json"),
      fixture("watch_bookmark.json"),
      event_line("ADDED", fixture("pod.json")),
      event_line("MODIFIED", fixture("node.json")),
      R"({"type":"ADDED","object":{"metadata":{"name":"p\u00e9\ud83d\ude00\n","uid":"u"},"spec":{"tolerations":[{"key":"k","tolerationSeconds":-0},{"tolerationSeconds":1e2}]}}})",
      R"( {"a" : [ 1 , -2.5e+3 , true , false , null , "\"\\\/\b\f\n\r\t" , {} , [] ] } )",
      "\xEF\xBB\xBF{\"metadata\":{\"name\":\"bom\",\"uid\":\"u\"}}",
  };
  for (const auto& s : seeds) {
    compare_engines(s);
  }
  // Edge cases of the grammar, each in a field we read and in one we skip.
  for (const char* v : {"1E5",
                        "-",
                        "-0",
                        "-0.0",
                        "00",
                        "01",
                        "1.",
                        ".5",
                        "1.e5",
                        "1e",
                        "1e+",
                        "+1",
                        "0x10",
                        "18446744073709551615",
                        "-9223372036854775808",
                        "1e400",
                        "tru",
                        "nul",
                        "falsey",
                        "\"\\ud800\"",
                        "\"\\udc00\"",
                        "\"\\ud800\\u0041\"",
                        "\"\\ud83d\\ude00\"",
                        "\"\\u12G4\"",
                        "\"\\x\"",
                        "\"a\x01b\"",
                        "\"\xc0\x80\"",
                        "\"\xe0\x80\x80\"",
                        "\"\xed\xa0\x80\"",
                        "\"\xf4\x90\x80\x80\"",
                        "\"\xf5\x80\"",
                        "\"\xc3\"",
                        "\"\xe2\x82\xac\"",
                        "\"\xf0\x9f\x98\x80\"",
                        "\"\x7f\"",
                        "[1,]",
                        "{\"a\":1,}",
                        "{\"a\" 1}",
                        "{1:2}",
                        "[",
                        "]"}) {
    const std::string value(v);
    compare_engines(
        R"({"metadata":{"name":"p","uid":"u"},"spec":{"tolerations":[{"tolerationSeconds":)" +
        value + "}]}}");
    compare_engines(R"({"metadata":{"name":)" + value + R"(,"uid":"u"}})");
    compare_engines(R"({"metadata":{"name":"p","uid":"u","skipped":)" + value + "}}");
    compare_engines(value);
  }
  // The one difference by design: an integer outside [-2^63, 2^64) is malformed for
  // simdjson, a floating-point number for nlohmann (informers_reference.hpp).
  for (const char* huge : {"18446744073709551616", "-9223372036854775809"}) {
    const std::string pod =
        R"({"metadata":{"name":"p","uid":"u","skipped":)" + std::string(huge) + "}}";
    const auto fast = decode_pod(pod);
    ASSERT_FALSE(fast) << huge;
    EXPECT_EQ(fast.error().code, make_error_code(errc::malformed_json)) << fast.error().message;
    EXPECT_TRUE(reference::decode_pod(pod)) << huge;
  }
  static constexpr std::string_view interesting = "\"\\{}[],:0-e.ntfu \x01\xff\xc3\xa9\xed";
  // TEC_DECODE_MUTATIONS raises the count for a longer soak (e.g. under ASan).
  const char* env = std::getenv("TEC_DECODE_MUTATIONS");
  const long mutations = env != nullptr ? std::strtol(env, nullptr, 10) : 3000;
  std::mt19937 rng(env != nullptr ? static_cast<unsigned>(mutations) : 1234U);
  for (long i = 0; i < mutations; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const std::size_t pos = rng() % s.size();
      const char c = interesting[rng() % interesting.size()];
      switch (rng() % 4) {
        case 0:
          s.resize(pos);
          break;
        case 1:
          s[pos] = c;
          break;
        case 2:
          s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), c);
          break;
        default:
          s.erase(pos, 1);
          break;
      }
    }
    compare_engines(s);
    if (HasFatalFailure()) {
      return;
    }
  }
}

}  // namespace
}  // namespace tec::informers

namespace tec::informers {
namespace {

TEST(watch_decoder, events_across_chunks_with_errors_in_order) {
  const std::string stream =
      event_line("ADDED", fixture("pod.json")) + "\n" +
      R"({"type":"MODIFIED","object":{"metadata":{"name":"p","namespace":"n","uid":"u","resourceVersion":"9"}}})" +
      "\r\n" + "{not json}\n" + fixture("watch_bookmark.json") + fixture("watch_error_410.json");
  for (const std::size_t chunk : {std::size_t{1}, std::size_t{7}, std::size_t{4096}}) {
    watch_decoder<pod_record> decoder;
    std::vector<std::string> seen;
    for (std::size_t pos = 0; pos < stream.size(); pos += chunk) {
      decoder.feed(
          std::string_view(stream).substr(pos, chunk),
          [&](pod_event&& e) {
            seen.push_back(std::string(to_string(e.type)) + ":" + e.resource_version());
          },
          [&](const error& e) { seen.push_back("error:" + e.code.message()); });
    }
    EXPECT_FALSE(decoder.has_partial_line());
    EXPECT_EQ(seen, (std::vector<std::string>{"ADDED:184467", "MODIFIED:9", "error:malformed JSON",
                                              "BOOKMARK:184999", "ERROR:"}))
        << "chunk " << chunk;
  }
}

TEST(watch_decoder, over_long_line_is_reported_and_skipped) {
  watch_decoder<node_record> decoder(64);
  std::vector<std::string> seen;
  decoder.feed(
      std::string(100, ' ') + "\n" + event_line("ADDED", R"({"metadata":{"name":"n","uid":"u"}})") +
          "\n",
      [&](node_event&& e) { seen.push_back(e.object.node.name); },
      [&](const error& e) {
        seen.push_back(e.code == make_error_code(errc::line_too_long) ? "long" : "?");
      });
  EXPECT_EQ(seen, (std::vector<std::string>{"long", "n"}));
}

}  // namespace
}  // namespace tec::informers

namespace tec::informers {
namespace {

// ---- LIST pages decoded as they stream (list_decoder) ----------------------------------------

/// What a streamed decode produced: the page (items included) or its error, and the skipped
/// items' messages.
template <class Record>
struct streamed {
  result<list_page<Record>> page = error{};
  std::vector<std::string> skipped;
};

/// Feeds `body` to a Decoder (a list_decoder unless said) cut at `cuts` (sorted offsets), then
/// finishes it.
template <class Record, class Decoder = list_decoder<Record>>
streamed<Record> stream_list(std::string_view body, const std::vector<std::size_t>& cuts,
                             list_limits limits = {}) {
  Decoder decoder(limits);
  std::vector<Record> items;
  streamed<Record> out;
  std::size_t from = 0;
  bool ok = true;
  auto feed = [&](std::size_t to) {
    if (ok) {
      ok = decoder.feed(
          body.substr(from, to - from), [&](Record&& r) { items.push_back(std::move(r)); },
          [&](const error& e) { out.skipped.push_back(e.message); });
    }
    from = to;
  };
  for (const std::size_t cut : cuts) {
    feed(cut);
  }
  feed(body.size());
  auto page = decoder.finish();
  if (page) {
    page->items = std::move(items);
  }
  out.page = std::move(page);
  return out;
}

template <class Record>
void expect_same_page(const streamed<Record>& got, const result<list_page<Record>>& want,
                      const std::string& context) {
  ASSERT_TRUE(got.page) << context << ": " << got.page.error().message;
  ASSERT_TRUE(want) << context;
  EXPECT_EQ(got.page->items, want->items) << context;
  EXPECT_EQ(got.page->resource_version, want->resource_version) << context;
  EXPECT_EQ(got.page->continue_token, want->continue_token) << context;
  EXPECT_TRUE(got.skipped.empty()) << context;
}

std::string pod_item(int i, const std::string& extra_metadata = "") {
  const std::string n = std::to_string(i);
  return R"({"metadata":{"name":"p)" + n + R"(","namespace":"ns","uid":"u)" + n +
         R"(","resourceVersion":")" + n + R"(",)" + extra_metadata +
         R"("ownerReferences":[{"kind":"ReplicaSet","name":"rs","uid":"r","controller":true}]},)"
         R"("spec":{"nodeName":"node-)" +
         n +
         R"(","tolerations":[{"key":"k","operator":"Exists","effect":"NoExecute",)"
         R"("tolerationSeconds":)" +
         n + R"(}]},"status":{"phase":"Running"}})";
}

/// Lists the whole-body decoder and the streaming one must agree on.
std::vector<std::string> list_bodies() {
  return {
      fixture("pod_list_page.json"),
      // Every item has a controller (each one's owner kind is its own), metadata after items.
      R"({"kind":"PodList","items":[)" + pod_item(1) + "," + pod_item(2) + "," + pod_item(3) +
          R"(],"metadata":{"continue":"c\"o\\n","resourceVersion":"77"},"apiVersion":"v1"})",
      // Whitespace everywhere, an escaped "items" key, brackets and quotes inside strings.
      " \r\n\t{ \"it\\u0065ms\" :\n [ \n" + pod_item(4, R"("annotations":{"a":"]}[{\"\\"},)") +
          " , " + pod_item(5) + " \n] , \"metadata\" : { \"resourceVersion\" : \"9\" } } \n",
      // A byte order mark, an empty items array, a nested "items" that is not the list's.
      "\xEF\xBB\xBF{\"metadata\":{\"resourceVersion\":\"1\",\"items\":[1]},\"items\":[]}",
      R"({"items":null,"metadata":{"resourceVersion":"2"}})",
      R"({"metadata":{"resourceVersion":"3"}})",
      // Two items arrays: both count, as for the whole-body decoder.
      R"({"items":[)" + pod_item(6) + R"(],"items":[)" + pod_item(7) + "]}",
  };
}

TEST(list_decoder, splits_at_every_byte_boundary_decode_like_the_whole_body) {
  for (const auto& body : list_bodies()) {
    const auto whole = decode_pod_list(body);
    ASSERT_TRUE(whole) << body << ": " << whole.error().message;
    expect_same_page(stream_list<pod_record>(body, {}), whole, "unsplit: " + body);
    for (std::size_t cut = 0; cut <= body.size(); ++cut) {
      expect_same_page(stream_list<pod_record>(body, {cut}), whole,
                       "cut at " + std::to_string(cut) + ": " + body);
      if (HasFatalFailure()) {
        return;
      }
    }
    std::vector<std::size_t> bytewise(body.size());
    std::iota(bytewise.begin(), bytewise.end(), std::size_t{0});
    expect_same_page(stream_list<pod_record>(body, bytewise), whole, "byte by byte: " + body);
  }
  // The owner kind of every item is its own (the whole-body decoder once kept the first).
  const auto page = stream_list<pod_record>(list_bodies()[1], {});
  ASSERT_TRUE(page.page);
  ASSERT_EQ(page.page->items.size(), 3U);
  for (const auto& item : page.page->items) {
    EXPECT_EQ(item.pod.owner_kind, "ReplicaSet") << item.pod.name;
  }
}

TEST(list_decoder, random_splits_of_random_mutations_agree_with_the_whole_body_decoder) {
  const auto bodies = list_bodies();
  static constexpr std::string_view interesting = "\"\\{}[],:0-e.ntfu \x01\xff";
  std::mt19937 rng(4321U);
  for (int i = 0; i < 3000; ++i) {
    std::string body = bodies[rng() % bodies.size()];
    for (int e = 0, edits = static_cast<int>(rng() % 3); e < edits && !body.empty(); ++e) {
      const std::size_t pos = rng() % body.size();
      const char c = interesting[rng() % interesting.size()];
      switch (rng() % 3) {
        case 0:
          body[pos] = c;
          break;
        case 1:
          body.insert(body.begin() + static_cast<std::ptrdiff_t>(pos), c);
          break;
        default:
          body.erase(pos, 1);
          break;
      }
    }
    std::vector<std::size_t> cuts;
    for (std::size_t k = 0, n = rng() % 6; k < n; ++k) {
      cuts.push_back(rng() % (body.size() + 1));
    }
    std::sort(cuts.begin(), cuts.end());
    const auto unsplit = stream_list<pod_record>(body, {});
    const auto split = stream_list<pod_record>(body, cuts);
    const auto via_reference =
        stream_list<pod_record, object_list_decoder<pod_record, &reference::decode_pod,
                                                    &reference::decode_pod_list>>(body, cuts);
    // Where the body is cut never matters, nor which tokenizer decodes the items.
    for (const auto* other : {&split, &via_reference}) {
      ASSERT_EQ(other->page.has_value(), unsplit.page.has_value()) << body;
      EXPECT_EQ(other->skipped.size(), unsplit.skipped.size()) << body;
      if (unsplit.page) {
        EXPECT_EQ(other->page->items, unsplit.page->items) << body;
        EXPECT_EQ(other->page->resource_version, unsplit.page->resource_version) << body;
      } else {
        EXPECT_EQ(other->page.error().code, unsplit.page.error().code) << body;
      }
    }
    // Against the whole-body decoder: the same when it succeeds; malformed JSON is malformed
    // for both; a wrong shape fails the whole body but only skips an item when streaming
    // (which may then reach a malformed part the whole-body decoder stopped before).
    const auto whole = decode_pod_list(body);
    if (whole) {
      expect_same_page(unsplit, whole, body);
    } else if (whole.error().code == make_error_code(errc::malformed_json) && valid_utf8(body)) {
      ASSERT_FALSE(unsplit.page) << body;
      EXPECT_EQ(unsplit.page.error().code, make_error_code(errc::malformed_json))
          << body << "\n"
          << unsplit.page.error().message;
    } else if (unsplit.page) {
      EXPECT_FALSE(unsplit.skipped.empty()) << body;
    }
    if (HasFatalFailure()) {
      return;
    }
  }
}

TEST(list_decoder, items_of_the_wrong_shape_are_skipped_and_named) {
  const std::string body = R"({"metadata":{"resourceVersion":"5"},"items":[)" + pod_item(1) +
                           R"(,{"metadata":{"name":"no-uid"}},null,"text",[1],)" +
                           R"({"metadata":{"name":"p","uid":"u"},"spec":{"tolerations":[)"
                           R"({"tolerationSeconds":1.5}]}},)" +
                           pod_item(2) + "]}";
  const auto got = stream_list<pod_record>(body, {17, 200});
  ASSERT_TRUE(got.page) << got.page.error().message;
  ASSERT_EQ(got.page->items.size(), 2U);
  EXPECT_EQ(got.page->items[0].pod.name, "p1");
  EXPECT_EQ(got.page->items[1].pod.name, "p2");
  EXPECT_EQ(got.page->resource_version, "5");
  ASSERT_EQ(got.skipped.size(), 5U);
  EXPECT_EQ(got.skipped[0].rfind("items[1]: ", 0), 0U) << got.skipped[0];
  EXPECT_NE(got.skipped[0].find("metadata.uid"), std::string::npos) << got.skipped[0];
  EXPECT_EQ(got.skipped[4].rfind("items[5]: ", 0), 0U) << got.skipped[4];
  EXPECT_NE(got.skipped[4].find("tolerationSeconds"), std::string::npos) << got.skipped[4];
}

TEST(list_decoder, an_item_that_is_not_utf8_is_skipped_and_the_page_kept) {
  const std::string bad = pod_item(2, "\"annotations\":{\"a\":\"\xff\xfe\"},");
  const std::string body = R"({"metadata":{"resourceVersion":"8"},"items":[)" + pod_item(1) + "," +
                           bad + "," + pod_item(3) + "]}";
  for (const std::size_t cut : {std::size_t{0}, std::size_t{60}, body.size() / 2}) {
    const auto got = stream_list<pod_record>(body, {cut});
    ASSERT_TRUE(got.page) << got.page.error().message;
    ASSERT_EQ(got.page->items.size(), 2U);
    EXPECT_EQ(got.page->items[0].pod.name, "p1");
    EXPECT_EQ(got.page->items[1].pod.name, "p3");
    ASSERT_EQ(got.skipped.size(), 1U);
    EXPECT_EQ(got.skipped[0], "items[1]: not UTF-8");
  }
  // A byte that is not UTF-8 outside the items is no object to skip: the page is broken.
  const auto envelope = stream_list<pod_record>(
      R"({"metadata":{"resourceVersion":"8\xff"},"items":[)" + pod_item(1) + "]}", {});
  EXPECT_FALSE(envelope.page);
}

TEST(list_decoder, broken_structure_and_early_ends_are_malformed) {
  for (const std::string& body : std::vector<std::string>{
           R"({"items":[)" + pod_item(1) + " " + pod_item(2) + "]}",
           R"({"items":[)" + pod_item(1) + ",]}", R"({"items":[,)" + pod_item(1) + "]}",
           R"({"items":[)" + pod_item(1) + ",{\"a\":}]}", R"({"items":[)" + pod_item(1),
           R"({"items":[)" + pod_item(1) + "]", R"({"items":[1 2]})", R"({"items":[}]})",
           R"({"items":[]}x)", std::string("")}) {
    const auto got = stream_list<pod_record>(body, {body.size() / 2});
    ASSERT_FALSE(got.page) << body;
    EXPECT_EQ(got.page.error().code, make_error_code(errc::malformed_json))
        << body << "\n"
        << got.page.error().message;
  }
}

TEST(list_decoder, bounds_one_item_the_envelope_and_the_page) {
  list_limits limits;
  limits.max_item_bytes = 1000;
  limits.max_page_bytes = 5000;
  const std::string big_item = R"({"metadata":{"name":"p","uid":"u","annotations":{"a":")" +
                               std::string(2000, 'a') + "\"}}}";
  const std::string big_envelope = R"({"kind":")" + std::string(2000, 'k') + R"(","items":[]})";
  std::string big_page = R"({"items":[)" + pod_item(0);
  for (int i = 1; i < 30; ++i) {
    big_page += "," + pod_item(i);
  }
  big_page += "]}";
  for (const auto& body : {R"({"items":[)" + big_item + "]}", big_envelope, big_page}) {
    // Fed in pieces smaller than the bounds: the decoder, not the chunking, must notice.
    std::vector<std::size_t> cuts;
    for (std::size_t c = 100; c < body.size(); c += 100) {
      cuts.push_back(c);
    }
    const auto got = stream_list<pod_record>(body, cuts, limits);
    ASSERT_FALSE(got.page) << body.substr(0, 60);
    EXPECT_EQ(got.page.error().code, make_error_code(errc::response_too_large))
        << got.page.error().message;
    EXPECT_NE(got.page.error().message.find("larger than"), std::string::npos)
        << got.page.error().message;
  }
  // Within the bounds, the same items are fine.
  EXPECT_TRUE(stream_list<pod_record>(R"({"items":[)" + pod_item(1) + "]}", {}, limits).page);
}

TEST(list_decoder, decodes_node_lists) {
  const std::string body = R"({"kind":"NodeList","metadata":{"resourceVersion":"8"},"items":[)" +
                           fixture("node.json") + "," + fixture("node.json") + "]}";
  const auto whole = decode_node_list(body);
  ASSERT_TRUE(whole) << whole.error().message;
  for (std::size_t cut = 0; cut <= body.size(); cut += 7) {
    expect_same_page(stream_list<node_record>(body, {cut}), whole, std::to_string(cut));
  }
}

// ---- server text in error messages ------------------------------------------------------------

TEST(printable, escapes_control_characters_and_clips_with_the_original_size) {
  EXPECT_EQ(printable("pod \"a\" is forbidden: ok"), "pod \"a\" is forbidden: ok");
  EXPECT_EQ(printable("caf\xC3\xA9 \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xF0\x9F\x98\x80");
  EXPECT_EQ(printable("a\nb\rc\td\x01\x7F"), "a\\nb\\rc\\td\\x01\\x7f");
  EXPECT_EQ(printable("bad \xFF\xC3 utf8"), "bad \\xff\\xc3 utf8");
  EXPECT_EQ(printable("\xC2\x85 and \xE2\x80\xA8"), "\\u0085 and \\u2028");
  const std::string forged =
      "denied\n2026-01-01T00:00:00.000Z INFO  controller evicted pod=\"kube-system/everything\"";
  const std::string safe = printable(forged);
  EXPECT_EQ(safe.find('\n'), std::string::npos) << safe;
  EXPECT_NE(safe.find("denied\\n2026-01-01"), std::string::npos) << safe;
  const std::string huge(200'074, 'x');
  const std::string clipped = printable(huge);
  EXPECT_LE(clipped.size(), 512U + 40U);
  EXPECT_NE(clipped.find("[clipped: 200074 bytes]"), std::string::npos) << clipped;
  EXPECT_EQ(printable(huge, 10), "xxxxxxxxxx... [clipped: 200074 bytes]");
  // An escape is never cut in half.
  EXPECT_EQ(printable("abcdefghi\n", 10), "abcdefghi... [clipped: 10 bytes]");
}

TEST(printable, decode_errors_quote_input_printably) {
  const auto time = decode_node(
      R"({"metadata":{"name":"n","uid":"u"},"spec":{"taints":[{"key":"k","timeAdded":"x\n2026-01-01 INFO forged"}]}})");
  ASSERT_FALSE(time);
  EXPECT_EQ(time.error().message.find('\n'), std::string::npos) << time.error().message;
  EXPECT_NE(time.error().message.find("x\\n2026"), std::string::npos) << time.error().message;
  const auto type = decode_pod_event(R"({"type":"ADDED\r\nINFO forged","object":{}})");
  ASSERT_FALSE(type);
  EXPECT_EQ(type.error().message.find('\r'), std::string::npos) << type.error().message;
  const auto name = decode_pod(
      R"({"metadata":{"name":"a\nb","uid":"u"},"spec":{"tolerations":[{"tolerationSeconds":"1"}]}})");
  ASSERT_FALSE(name);
  EXPECT_EQ(name.error().message.find('\n'), std::string::npos) << name.error().message;
}

}  // namespace
}  // namespace tec::informers
