// The admission webhook's answer, without the network: decode an AdmissionReview of a Node
// UPDATE, preview the added NoExecute taint on what the caches hold, encode the answer (issue
// 32 wants well under 100 ms for a node with 110 pods). The cluster: 1,000 nodes, the tainted
// node with 110 pods (each with the two DefaultTolerationSeconds tolerations, a third of them
// also tolerating the taint for 300 s, a tenth forever). The reader copies the pods and nodes
// on every call, as the daemon's reader copies them out of its stores.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tec/admission/review.hpp"
#include "tec/admission/webhook.hpp"

namespace {

using namespace tec;

constexpr int node_count = 1'000;
constexpr int pods_on_target = 110;

struct bench_cluster final : admission::cluster_reader {
  std::vector<controller::pod_view> pods;
  std::vector<controller::node_view> all_nodes;
  controller::eviction_policy in_force;

  [[nodiscard]] std::optional<std::string> not_ready() const override { return std::nullopt; }
  [[nodiscard]] std::vector<controller::pod_view> pods_on_node(
      std::string_view /*node*/) const override {
    return pods;
  }
  [[nodiscard]] std::vector<controller::node_view> nodes() const override { return all_nodes; }
  [[nodiscard]] std::vector<std::string> opted_out_namespaces() const override {
    return {"kube-system"};
  }
  [[nodiscard]] controller::eviction_policy policy() const override { return in_force; }
  [[nodiscard]] std::int64_t now_unix() const override { return 1'800'000'000; }
};

controller::toleration default_toleration(const char* key) {
  return {.key = key,
          .op = controller::toleration_operator::exists,
          .value = {},
          .effect = controller::taint_effect::no_execute,
          .seconds = 300};
}

bench_cluster make_cluster(int pods = pods_on_target) {
  bench_cluster c;
  for (int i = 0; i < node_count; ++i) {
    controller::node_view n{.name = "node-" + std::to_string(i), .taints = {}, .hold = {}};
    if (i % 20 == 0) {
      n.taints.push_back({.key = "node.kubernetes.io/unreachable",
                          .value = {},
                          .effect = controller::taint_effect::no_execute,
                          .time_added_unix = 0});
    }
    c.all_nodes.push_back(std::move(n));
  }
  for (int i = 0; i < pods; ++i) {
    controller::pod_view p;
    p.namespace_ = "team-" + std::to_string(i % 12);
    p.name = "app-" + std::to_string(i) + "-7d9f8c6b5-x2x4z";
    p.uid = "6f0c1a2e-0000-4000-8000-" + std::to_string(100'000'000'000 + i);
    p.node_name = "node-7";
    p.phase = controller::pod_phase::running;
    p.owner_kind = "ReplicaSet";
    p.tolerations = {default_toleration("node.kubernetes.io/not-ready"),
                     default_toleration("node.kubernetes.io/unreachable")};
    if (i % 3 == 0) {
      p.tolerations.push_back({.key = "dedicated",
                               .op = controller::toleration_operator::equal,
                               .value = "x",
                               .effect = controller::taint_effect::no_execute,
                               .seconds = 300});
    } else if (i % 10 == 1) {
      p.tolerations.push_back({.key = "dedicated",
                               .op = controller::toleration_operator::exists,
                               .value = {},
                               .effect = {},
                               .seconds = std::nullopt});
    }
    c.pods.push_back(std::move(p));
  }
  c.in_force.storm_breaker.max_tainted_nodes_percent = 50;
  c.in_force.rate_limit.evictions_per_second = 5;
  return c;
}

/// A Node as the API server sends it: labels, annotations, conditions and 40 images (what
/// makes a real one 10-20 KB).
std::string node_json(const std::string& taints) {
  std::string images;
  for (int i = 0; i < 40; ++i) {
    images +=
        std::string(i == 0 ? "" : ",") + R"({"names":["registry.example.com/team/image-)" +
        std::to_string(i) +
        R"(@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","registry.example.com/team/image-)" +
        std::to_string(i) + R"(:v1.2.3"],"sizeBytes":123456789})";
  }
  return R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"node-7","uid":"5b8c","resourceVersion":"123456","labels":{"kubernetes.io/hostname":"node-7","kubernetes.io/os":"linux","topology.kubernetes.io/zone":"zone-a","node.kubernetes.io/instance-type":"m5.2xlarge"},"annotations":{"node.alpha.kubernetes.io/ttl":"0","volumes.kubernetes.io/controller-managed-attach-detach":"true"}},"spec":{"podCIDR":"10.0.7.0/24","taints":)" +
         taints +
         R"(},"status":{"capacity":{"cpu":"8","memory":"32Gi","pods":"110"},"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"2026-11-28T10:00:00Z","lastTransitionTime":"2026-11-01T10:00:00Z"}],"images":[)" +
         images + "]}}";
}

std::string review(const std::string& object, const std::string& old_object) {
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","kind":{"group":"","version":"v1","kind":"Node"},"resource":{"group":"","version":"v1","resource":"nodes"},"name":"node-7","operation":"UPDATE","userInfo":{"username":"alice","groups":["system:authenticated"]},"object":)" +
         object + R"(,"oldObject":)" + old_object + R"(,"dryRun":false}})";
}

/// A taint added: decode, preview (110 pods, 1,000 nodes), encode.
void BM_admission_taint_added(benchmark::State& state) {
  const auto cluster = make_cluster();
  const std::string body = review(
      node_json(R"([{"key":"dedicated","value":"x","effect":"NoExecute"}])"), node_json("[]"));
  for (auto _ : state) {
    auto answer = admission::serve(body, cluster);
    benchmark::DoNotOptimize(answer);
  }
  state.counters["body_bytes"] = static_cast<double>(body.size());
}
BENCHMARK(BM_admission_taint_added)->Unit(benchmark::kMicrosecond);

/// `n` distinct NoExecute taints, as a JSON array.
std::string many_taints(int n) {
  std::string out = "[";
  for (int i = 0; i < n; ++i) {
    out += std::string(i == 0 ? "" : ",") + R"({"key":"attack-)" + std::to_string(i) +
           R"(","value":"x","effect":"NoExecute"})";
  }
  return out + "]";
}

/// A hostile review: a node with 5,000 pods, and range(0) NoExecute taints added at once (64:
/// the most previewed; 8,000, about 450 KB, within the body limit: refused a preview, one
/// warning); range(1) = 1 with the policy's
/// deny mode on (every added taint previewed). The cost must stay linear in the pods whatever
/// the request holds (a 10,000-taint review once cost 14.8 s of CPU).
void BM_admission_many_taints(benchmark::State& state) {
  auto cluster = make_cluster(5'000);
  if (state.range(1) != 0) {
    cluster.in_force.admission.deny_evicting_more_than = 1'000'000;
  }
  const std::string body =
      review(node_json(many_taints(static_cast<int>(state.range(0)))), node_json("[]"));
  for (auto _ : state) {
    auto answer = admission::serve(body, cluster);
    benchmark::DoNotOptimize(answer);
  }
  state.counters["body_bytes"] = static_cast<double>(body.size());
}
BENCHMARK(BM_admission_many_taints)
    ->Args({1, 0})
    ->Args({64, 0})
    ->Args({64, 1})
    ->Args({8'000, 0})
    ->Unit(benchmark::kMillisecond);

/// Another change of the node (a label): decode and compare only.
void BM_admission_no_taint_change(benchmark::State& state) {
  const auto cluster = make_cluster();
  const std::string body = review(node_json("[]"), node_json("[]"));
  for (auto _ : state) {
    auto answer = admission::serve(body, cluster);
    benchmark::DoNotOptimize(answer);
  }
}
BENCHMARK(BM_admission_no_taint_change)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
