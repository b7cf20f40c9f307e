#include "tec/admission/review.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace tec::admission {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string node_json(const std::string& name, const std::string& taints,
                      const std::string& annotations = "{}") {
  return R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + name + R"(","annotations":)" +
         annotations + R"(},"spec":{"taints":)" + taints + "}}";
}

std::string review(const std::string& op, const std::string& object, const std::string& old,
                   const std::string& version = "admission.k8s.io/v1") {
  return R"({"apiVersion":")" + version +
         R"(","kind":"AdmissionReview","request":{"uid":"u-1","kind":{"group":"","version":"v1","kind":"Node"},"operation":")" +
         op + R"(","userInfo":{"username":"alice"},"object":)" + object + R"(,"oldObject":)" + old +
         "}}";
}

TEST(admission_review, decodes_an_update) {
  const auto r = decode_review(
      review("UPDATE",
             node_json("n1", R"([{"key":"k","value":"v","effect":"NoExecute"}])",
                       R"({"taint-eviction-controller/acknowledge-eviction":"true"})"),
             node_json("n1", "[]")));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->api_version, "admission.k8s.io/v1");
  EXPECT_EQ(r->uid, "u-1");
  EXPECT_EQ(r->op, operation::update);
  EXPECT_EQ(r->user, "alice");
  ASSERT_TRUE(r->object);
  EXPECT_EQ(r->object->node.name, "n1");
  ASSERT_EQ(r->object->node.taints.size(), 1U);
  EXPECT_EQ(r->object->node.taints[0].key, "k");
  EXPECT_EQ(r->object->node.taints[0].effect, controller::taint_effect::no_execute);
  EXPECT_TRUE(r->object->acknowledged);
  ASSERT_TRUE(r->old_object);
  EXPECT_TRUE(r->old_object->node.taints.empty());
  EXPECT_FALSE(r->old_object->acknowledged);
}

TEST(admission_review, v1beta1_is_answered_in_v1beta1) {
  const auto r =
      decode_review(review("CREATE", node_json("n1", "[]"), "null", "admission.k8s.io/v1beta1"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->api_version, "admission.k8s.io/v1beta1");
  EXPECT_FALSE(r->old_object);
  review_response answer;
  answer.api_version = r->api_version;
  answer.uid = r->uid;
  const auto body = nlohmann::json::parse(encode_review(answer));
  EXPECT_EQ(body["apiVersion"], "admission.k8s.io/v1beta1");
  EXPECT_EQ(body["kind"], "AdmissionReview");
  EXPECT_EQ(body["response"]["uid"], "u-1");
  EXPECT_EQ(body["response"]["allowed"], true);
  EXPECT_FALSE(body["response"].contains("warnings"));
  EXPECT_FALSE(body["response"].contains("status"));
}

TEST(admission_review, acknowledgement_must_be_true) {
  const auto r = decode_review(
      review("CREATE",
             node_json("n1", "[]", R"({"taint-eviction-controller/acknowledge-eviction":"yes"})"),
             "null"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->object->acknowledged);
}

TEST(admission_review, encodes_a_refusal_with_warnings) {
  review_response refusal;
  refusal.uid = "u";
  refusal.allowed = false;
  refusal.warnings = {"a", "b"};
  refusal.code = 403;
  refusal.message = "no";
  const auto body = nlohmann::json::parse(encode_review(refusal));
  EXPECT_EQ(body["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(body["response"]["allowed"], false);
  EXPECT_EQ(body["response"]["warnings"], nlohmann::json::array({"a", "b"}));
  EXPECT_EQ(body["response"]["status"]["code"], 403);
  EXPECT_EQ(body["response"]["status"]["message"], "no");
}

TEST(admission_review, delete_needs_no_object) {
  const auto r = decode_review(review("DELETE", "null", "null"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->op, operation::delete_);
  EXPECT_FALSE(r->object);
}

/// The error for `body`: one line, naming what is wrong.
std::string error_of(const std::string& body) {
  const auto r = decode_review(body);
  EXPECT_FALSE(r);
  if (r) {
    return {};
  }
  const auto& m = r.error().message;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_LE(m.size(), max_error_bytes + 64) << m;
  return m;
}

TEST(admission_review, strict_about_what_it_needs) {
  const auto node = node_json("n1", "[]");
  EXPECT_THAT(error_of(""), HasSubstr("AdmissionReview: not JSON"));
  EXPECT_THAT(error_of("{\"apiVersion\":"), HasSubstr("not JSON"));
  EXPECT_THAT(error_of("[]"), HasSubstr("expected an AdmissionReview object"));
  EXPECT_THAT(error_of(R"({"apiVersion":"v1","kind":"AdmissionReview"})"),
              HasSubstr("apiVersion: expected admission.k8s.io/v1 or admission.k8s.io/v1beta1, "
                        "got \"v1\""));
  EXPECT_THAT(error_of(R"({"apiVersion":"admission.k8s.io/v1","kind":"Pod"})"),
              HasSubstr("kind: expected AdmissionReview"));
  EXPECT_THAT(error_of(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})"),
              HasSubstr("request: missing"));
  EXPECT_THAT(
      error_of(
          R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}})"),
      HasSubstr("request.uid: expected a string"));
  EXPECT_THAT(
      error_of(
          R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"}})"),
      HasSubstr("request.kind: missing"));
  auto pod = review("CREATE", node, "null");
  pod.replace(pod.find(R"("kind":"Node"})"), 14, R"("kind":"Pod"})");
  EXPECT_THAT(error_of(pod), HasSubstr("request.kind: expected a core Node"));
  EXPECT_THAT(error_of(review("PATCH", node, "null")),
              HasSubstr("request.operation: expected CREATE, UPDATE, DELETE or CONNECT, got "
                        "\"PATCH\""));
  EXPECT_THAT(error_of(review("CREATE", "null", "null")), HasSubstr("request.object: missing"));
  EXPECT_THAT(error_of(review("UPDATE", node, "null")), HasSubstr("request.oldObject: missing"));
  EXPECT_THAT(error_of(review("UPDATE", node, "[1]")),
              HasSubstr("request.oldObject: expected an object"));
  EXPECT_THAT(error_of(review("CREATE", node_json("n1", "5"), "null")),
              HasSubstr("request.object: "));
  EXPECT_THAT(error_of(review("CREATE", R"({"metadata":{}})", "null")),
              HasSubstr("request.object: "));
}

TEST(admission_review, bounded_and_escaped) {
  // Deep nesting is refused, not recursed into.
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  EXPECT_THAT(error_of(deep), HasSubstr("nested more than 64 levels deep"));
  EXPECT_THAT(error_of(std::string(100'000, '[')), HasSubstr("nested more than 64 levels deep"));
  auto deep_node =
      review("CREATE", node_json("n1", std::string(70, '[') + std::string(70, ']')), "null");
  EXPECT_THAT(error_of(deep_node), HasSubstr("nested more than 64 levels deep"));
  // Too large.
  EXPECT_THAT(error_of(std::string(max_review_bytes + 1, ' ')), HasSubstr("more than 524288"));
  // A hostile value is escaped and clipped: one line.
  const auto m = error_of(review("\\n" + std::string(5000, 'x'), node_json("n1", "[]"), "null"));
  EXPECT_THAT(m, HasSubstr("\\n"));
  EXPECT_THAT(m, HasSubstr("clipped"));
  EXPECT_THAT(error_of(std::string("\x01\xff{", 3)), Not(HasSubstr("\x01")));
}

}  // namespace
}  // namespace tec::admission
