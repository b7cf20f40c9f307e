// Fuzz target: the admission webhook's answer to a body (tec/admission/webhook.hpp), on a small
// cluster (two nodes, a few pods) under a policy with deny mode on. Whatever the bytes:
// - a 400 is one line (text/plain) of at most about max_error_bytes;
// - a 200 is an AdmissionReview in the version asked, whose warnings are at most
//   max_warnings + 1 lines of at most max_warning_bytes each, and whose refusal (403) carries
//   a message of at most max_message_bytes.

#include <cstdint>
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "support.hpp"
#include "tec/admission/webhook.hpp"

namespace {

using namespace tec;

struct small_cluster final : admission::cluster_reader {
  [[nodiscard]] std::optional<std::string> not_ready() const override { return std::nullopt; }
  [[nodiscard]] std::vector<controller::pod_view> pods_on_node(
      std::string_view node) const override {
    std::vector<controller::pod_view> out;
    for (int i = 0; i < 3; ++i) {
      controller::pod_view p;
      p.namespace_ = "ns";
      p.name = "p" + std::to_string(i);
      p.uid = p.name;
      p.node_name = std::string(node);
      p.phase = controller::pod_phase::running;
      out.push_back(std::move(p));
    }
    return out;
  }
  [[nodiscard]] std::vector<controller::node_view> nodes() const override {
    return {{.name = "n1", .taints = {}, .hold = {}}, {.name = "n2", .taints = {}, .hold = {}}};
  }
  [[nodiscard]] std::vector<std::string> opted_out_namespaces() const override { return {}; }
  [[nodiscard]] controller::eviction_policy policy() const override {
    controller::eviction_policy p;
    p.storm_breaker.max_tainted_nodes_percent = 40;
    p.admission.deny_evicting_more_than = 1;
    p.admission.deny_if_breaker_opens = true;
    return p;
  }
  [[nodiscard]] std::int64_t now_unix() const override { return 1'800'000'000; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const small_cluster cluster;
  const std::string_view input = tec::fuzz::as_text(data, size);
  const auto answer = admission::serve(input, cluster);
  const std::string shown =
      "input: " + std::string(input.substr(0, 512)) + "\nanswer: " + answer.body.substr(0, 2048);
  if (answer.status == 400) {
    TEC_FUZZ_CHECK(answer.body.find('\n') == answer.body.size() - 1, shown);
    TEC_FUZZ_CHECK(answer.body.size() <= admission::max_error_bytes + 64, shown);
    return 0;
  }
  TEC_FUZZ_CHECK(answer.status == 200, shown);
  const auto review = nlohmann::json::parse(answer.body, nullptr, false);
  TEC_FUZZ_CHECK(!review.is_discarded() && review.is_object(), shown);
  const auto& version = review["apiVersion"];
  TEC_FUZZ_CHECK(version == admission::api_version_v1 || version == admission::api_version_v1beta1,
                 shown);
  const auto& response = review["response"];
  if (response.contains("warnings")) {
    TEC_FUZZ_CHECK(response["warnings"].size() <= admission::max_warnings + 1, shown);
    for (const auto& w : response["warnings"]) {
      TEC_FUZZ_CHECK(w.get<std::string>().size() <= admission::max_warning_bytes + 64, shown);
      TEC_FUZZ_CHECK(w.get<std::string>().find('\n') == std::string::npos, shown);
    }
  }
  if (response["allowed"] == false) {
    TEC_FUZZ_CHECK(response["status"]["code"] == 403, shown);
    TEC_FUZZ_CHECK(response["status"]["message"].get<std::string>().size() <=
                       admission::max_message_bytes + 64,
                   shown);
  }
  return 0;
}
