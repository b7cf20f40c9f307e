// Pod writes and events against the real local kube-apiserver (KUBECONFIG from ctest's
// cluster fixture). There is no kubelet: a deleted pod with a nodeName stays Terminating, so
// every test finalizes its pods with gracePeriodSeconds 0 when it ends.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "k8sclient/support/run_sync.hpp"
#include "tec/informers/decode.hpp"
#include "tec/informers/store.hpp"
#include "tec/k8sclient/config.hpp"
#include "tec/writers/event_recorder.hpp"
#include "tec/writers/eviction_sink.hpp"
#include "tec/writers/pod_writer.hpp"

namespace tec::writers {
namespace {
using informers::decode_pod;
using informers::pod_store;
using k8sclient::request;
using k8sclient::response;

using base::errc;
using base::make_error_code;
using informers::disruption_state;
using informers::pod_record;
using k8sclient::client;
using k8sclient::event_type;

namespace asio = boost::asio;
namespace http = boost::beast::http;
using namespace std::chrono_literals;
using controller::event_kind;
using controller::eviction_result;
using controller::eviction_status;
using controller::pod_ref;
using nlohmann::json;

using k8sclient::testing::run_sync;

std::string random_suffix() {
  std::random_device rd;
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", rd());
  return buf;
}

/// The cluster's admin kubeconfig, from KUBECONFIG.
std::optional<k8sclient::rest_config> admin_config() {
  const char* path = std::getenv("KUBECONFIG");
  if (path == nullptr || *path == '\0') {
    return std::nullopt;
  }
  auto cfg = k8sclient::load_kubeconfig(path);
  if (!cfg) {
    ADD_FAILURE() << "cannot load " << path << ": " << cfg.error().message;
    return std::nullopt;
  }
  return cfg.value();
}

class writes_itest : public ::testing::Test {
protected:
  void SetUp() override {
    auto cfg = admin_config();
    if (!cfg) {
      GTEST_SKIP() << "KUBECONFIG is not set: integration tests need the local cluster";
    }
    client_.emplace(io_.get_executor(), *cfg);
    ns_ = "tec-itest-" + random_suffix();
    auto r = call(http::verb::post, "/api/v1/namespaces",
                  json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns_}}}});
    ASSERT_EQ(r.status, 201U) << r.body;
  }

  void TearDown() override {
    if (!client_) {
      return;
    }
    // Pods first, at once (no kubelet will ever confirm a graceful delete), then events, then
    // the namespace. Without kube-controller-manager nothing empties a Terminating namespace,
    // so its finalizer is cleared by hand.
    const std::string pods = "/api/v1/namespaces/" + ns_ + "/pods";
    auto list = call(http::verb::get, pods);
    if (list.status == 200) {
      for (const auto& item : json::parse(list.body)["items"]) {
        call(http::verb::delete_, pods + "/" + item["metadata"]["name"].get<std::string>(),
             json{{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"gracePeriodSeconds", 0}});
      }
    }
    call(http::verb::delete_, "/api/v1/namespaces/" + ns_ + "/events");
    call(http::verb::delete_, "/api/v1/namespaces/" + ns_);
    call(http::verb::put, "/api/v1/namespaces/" + ns_ + "/finalize",
         json{{"apiVersion", "v1"},
              {"kind", "Namespace"},
              {"metadata", {{"name", ns_}}},
              {"spec", {{"finalizers", json::array()}}}});
  }

  response call(http::verb method, const std::string& target, const json& body = nullptr) {
    request req;
    req.method = method;
    req.target = target;
    if (!body.is_null()) {
      req.body = body.dump();
    }
    auto r = run_sync(io_, client_->send(std::move(req)));
    if (!r || !*r) {
      ADD_FAILURE() << "request " << target << " failed: " << (r ? r->error().message : "hung");
      return {};
    }
    return std::move(r->value());
  }

  /// Creates a pod bound to a (non-existent) node, so a delete leaves it Terminating.
  pod_ref create_pod(const std::string& name, std::int64_t generation = 0) {
    json meta = {{"name", name}};
    if (generation > 0) {
      meta["generation"] = generation;  // kept by servers before 1.33 (KEP-5067)
    }
    const json pod = {{"apiVersion", "v1"},
                      {"kind", "Pod"},
                      {"metadata", meta},
                      {"spec",
                       {{"nodeName", "tec-itest-node"},
                        {"containers", {{{"name", "c"}, {"image", "registry.invalid/none"}}}}}}};
    auto r = call(http::verb::post, "/api/v1/namespaces/" + ns_ + "/pods", pod);
    EXPECT_EQ(r.status, 201U) << r.body;
    const json created = json::parse(r.body, nullptr, false);
    if (!created.is_object()) {
      return {ns_, name, ""};
    }
    return {ns_, name, created["metadata"]["uid"].get<std::string>()};
  }

  json get_pod(const std::string& name) {
    auto r = call(http::verb::get, "/api/v1/namespaces/" + ns_ + "/pods/" + name);
    EXPECT_EQ(r.status, 200U) << r.body;
    return json::parse(r.body, nullptr, false);
  }

  /// The pod as the informer would cache it: GET, decoded, into `store`.
  void cache_pod(pod_store& store, const std::string& name) {
    auto r = call(http::verb::get, "/api/v1/namespaces/" + ns_ + "/pods/" + name);
    ASSERT_EQ(r.status, 200U) << r.body;
    auto decoded = decode_pod(r.body);
    ASSERT_TRUE(decoded) << decoded.error().message;
    store.upsert(decoded.value());
  }

  /// One eviction through `sink`, run to its end (bounded).
  std::optional<eviction_result> evict(k8s_eviction_sink& sink, const pod_ref& pod) {
    return evict(sink, controller::eviction_request{pod, {}});
  }

  /// One eviction `req` through `sink`, run to its end (bounded).
  std::optional<eviction_result> evict(k8s_eviction_sink& sink, controller::eviction_request req) {
    std::optional<eviction_result> got;
    sink.evict(std::move(req), [&](eviction_result res) { got = std::move(res); });
    io_.restart();
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!got && std::chrono::steady_clock::now() < deadline) {
      io_.run_one_until(deadline);
    }
    EXPECT_TRUE(got) << "the eviction did not end within 30 s";
    return got;
  }

  /// A client authenticated as ServiceAccount ns_/`name` (created if missing), through
  /// deploy/local/cluster.sh sa-kubeconfig. Sets `token` to its bearer token.
  std::optional<k8sclient::rest_config> service_account(const std::string& name,
                                                        std::string& token) {
    const std::filesystem::path script =
        std::filesystem::path(TEC_SOURCE_DIR) / "deploy/local/cluster.sh";
    const std::filesystem::path cluster_dir =
        std::filesystem::path(std::getenv("KUBECONFIG")).parent_path();
    const std::filesystem::path out = cluster_dir / ("sa-" + ns_ + "-" + name + ".kubeconfig");
    const std::string cmd = "TEC_CLUSTER_DIR='" + cluster_dir.string() + "' '" + script.string() +
                            "' sa-kubeconfig '" + ns_ + "' '" + name + "' '" + out.string() +
                            "' > /dev/null";
    if (std::system(cmd.c_str()) != 0) {
      ADD_FAILURE() << "failed: " << cmd;
      return std::nullopt;
    }
    auto sa = k8sclient::load_kubeconfig(out.string());
    std::filesystem::remove(out);
    if (!sa) {
      ADD_FAILURE() << sa.error().message;
      return std::nullopt;
    }
    token = sa->bearer_token;
    return sa.value();
  }

  static const json* find_condition(const json& pod, const std::string& type) {
    const auto& conds = pod["status"]["conditions"];
    if (!conds.is_array()) {
      return nullptr;
    }
    for (const auto& c : conds) {
      if (c["type"] == type) {
        return &c;
      }
    }
    return nullptr;
  }

  asio::io_context io_;
  std::optional<client> client_;
  std::string ns_;
};

TEST_F(writes_itest, delete_with_a_stale_uid_is_a_uid_mismatch_and_leaves_the_pod) {
  const pod_ref pod = create_pod("web-0");
  pod_writer w(*client_);
  auto r = run_sync(io_, w.delete_pod(ns_, pod.name, "00000000-0000-0000-0000-000000000000"));
  ASSERT_TRUE(r && *r) << (r ? r->error().message : "hung");
  EXPECT_EQ(r->value(), delete_outcome::uid_mismatch);
  const json live = get_pod(pod.name);
  EXPECT_FALSE(live["metadata"].contains("deletionTimestamp"));
}

TEST_F(writes_itest, delete_with_the_right_uid_marks_the_pod_terminating) {
  const pod_ref pod = create_pod("web-1");
  pod_writer w(*client_);
  auto r = run_sync(io_, w.delete_pod(ns_, pod.name, pod.uid));
  ASSERT_TRUE(r && *r) << (r ? r->error().message : "hung");
  EXPECT_EQ(r->value(), delete_outcome::deleted);
  const json live = get_pod(pod.name);
  EXPECT_TRUE(live["metadata"].contains("deletionTimestamp")) << live.dump();
  // Deleting again while Terminating is still accepted (idempotent for the controller).
  auto again = run_sync(io_, w.delete_pod(ns_, pod.name, pod.uid));
  ASSERT_TRUE(again && *again);
  EXPECT_EQ(again->value(), delete_outcome::deleted);
}

TEST_F(writes_itest, delete_of_a_missing_pod_is_not_found) {
  pod_writer w(*client_);
  auto r = run_sync(io_, w.delete_pod(ns_, "no-such-pod", "00000000-0000-0000-0000-000000000001"));
  ASSERT_TRUE(r && *r) << (r ? r->error().message : "hung");
  EXPECT_EQ(r->value(), delete_outcome::not_found);
}

TEST_F(writes_itest, the_condition_patch_is_visible_on_the_pod) {
  const pod_ref pod = create_pod("web-2");
  pod_writer w(*client_);
  auto r = run_sync(io_, w.add_disruption_condition(ns_, pod.name, pod.uid));
  ASSERT_TRUE(r && *r) << (r ? r->error().message : "hung");
  EXPECT_EQ(r->value(), patch_outcome::patched);
  const json live = get_pod(pod.name);
  const json* cond = find_condition(live, "DisruptionTarget");
  ASSERT_NE(cond, nullptr) << live["status"].dump();
  EXPECT_EQ((*cond)["status"], "True");
  EXPECT_EQ((*cond)["reason"], "DeletionByTaintManager");
  EXPECT_EQ((*cond)["message"], "Taint manager: deleting due to NoExecute taint");
  EXPECT_TRUE((*cond)["lastTransitionTime"].is_string());
}

// The withdrawal (an eviction cancelled after the condition went on) on the real API server:
// the strategic merge keeps one DisruptionTarget condition, False, without reason or message.
TEST_F(writes_itest, the_condition_withdrawal_leaves_it_false_without_reason) {
  const pod_ref pod = create_pod("web-2w");
  pod_writer w(*client_);
  auto r = run_sync(io_, w.add_disruption_condition(ns_, pod.name, pod.uid));
  ASSERT_TRUE(r && *r) << (r ? r->error().message : "hung");
  auto back = run_sync(io_, w.withdraw_disruption_condition(ns_, pod.name, pod.uid));
  ASSERT_TRUE(back && *back) << (back ? back->error().message : "hung");
  EXPECT_EQ(back->value(), patch_outcome::patched);
  const json live = get_pod(pod.name);
  std::size_t n = 0;
  for (const auto& c : live["status"]["conditions"]) {
    n += c["type"] == "DisruptionTarget" ? 1U : 0U;
  }
  EXPECT_EQ(n, 1U) << live["status"].dump();
  const json* cond = find_condition(live, "DisruptionTarget");
  ASSERT_NE(cond, nullptr) << live["status"].dump();
  EXPECT_EQ((*cond)["status"], "False");
  EXPECT_FALSE(cond->contains("reason")) << cond->dump();
  EXPECT_FALSE(cond->contains("message")) << cond->dump();
  EXPECT_TRUE((*cond)["lastTransitionTime"].is_string());
  // For a re-created pod of that name: refused by UID.
  auto other = run_sync(
      io_, w.withdraw_disruption_condition(ns_, pod.name, "00000000-0000-0000-0000-000000000003"));
  ASSERT_TRUE(other && *other);
  EXPECT_EQ(other->value(), patch_outcome::uid_mismatch);
}

TEST_F(writes_itest, a_condition_patch_for_a_replaced_pod_is_refused_by_uid) {
  const pod_ref pod = create_pod("web-3");
  pod_writer w(*client_);
  auto r = run_sync(
      io_, w.add_disruption_condition(ns_, pod.name, "00000000-0000-0000-0000-000000000002"));
  ASSERT_TRUE(r && *r) << (r ? r->error().message : "hung");
  EXPECT_EQ(r->value(), patch_outcome::uid_mismatch);
  EXPECT_EQ(find_condition(get_pod(pod.name), "DisruptionTarget"), nullptr);
}

TEST_F(writes_itest, the_eviction_sink_patches_and_deletes) {
  const pod_ref pod = create_pod("web-4");
  k8s_eviction_sink sink(io_.get_executor(), *client_, nullptr);
  const auto got = evict(sink, pod);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::deleted) << got->error;
  const json live = get_pod(pod.name);
  EXPECT_NE(find_condition(live, "DisruptionTarget"), nullptr);
  EXPECT_TRUE(live["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(sink.stats().deletions, 1U);
}

// observedGeneration goes on the condition only where the server's schema has the field
// (1.33+). The local 1.20 server serves no OpenAPI v3 (404): the pod's generation, which it
// keeps, is not sent (the server would drop an unknown field anyway, or refuse it under strict
// field validation on newer servers).
TEST_F(writes_itest, observed_generation_is_discovered_not_assumed) {
  pod_writer w(*client_);
  auto found = run_sync(io_, w.discover_condition_observed_generation());
  ASSERT_TRUE(found && *found) << (found ? found->error().message : "hung");
  const auto version = call(http::verb::get, "/version");
  const json v = json::parse(version.body, nullptr, false);
  ASSERT_TRUE(v.is_object()) << version.body;
  const int minor = std::atoi(v.value("minor", "0").c_str());
  EXPECT_EQ(found->value(), minor >= 33) << "server 1." << minor;

  const pod_ref pod = create_pod("web-10", 5);
  pod_store pods;
  cache_pod(pods, pod.name);
  ASSERT_EQ(pods.get(ns_, pod.name)->generation, 5);
  k8s_eviction_sink sink(io_.get_executor(), *client_, nullptr, {.pods = &pods});
  const auto got = evict(sink, pod);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::deleted) << got->error;
  const json live = get_pod(pod.name);
  const json* cond = find_condition(live, "DisruptionTarget");
  ASSERT_NE(cond, nullptr) << live["status"].dump();
  EXPECT_EQ(cond->contains("observedGeneration"), found->value()) << cond->dump();
}

TEST_F(writes_itest, a_recorded_event_is_found_by_the_pods_uid) {
  const pod_ref pod = create_pod("web-5");
  event_recorder rec(io_.get_executor(), *client_);
  rec.start();
  ASSERT_TRUE(rec.record(pod, event_kind::marking_for_deletion));
  io_.restart();
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (rec.stats().sent + rec.stats().failed == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    io_.run_one_until(deadline);
  }
  rec.stop();
  ASSERT_EQ(rec.stats().sent, 1U);

  // The selector kubectl describe uses: involvedObject.uid (plus name and namespace).
  auto r = call(http::verb::get, "/api/v1/namespaces/" + ns_ +
                                     "/events?fieldSelector=involvedObject.uid%3D" + pod.uid);
  ASSERT_EQ(r.status, 200U) << r.body;
  const json items = json::parse(r.body)["items"];
  ASSERT_EQ(items.size(), 1U) << r.body;
  const json& ev = items[0];
  EXPECT_EQ(ev["type"], "Normal");
  EXPECT_EQ(ev["reason"], "TaintManagerEviction");
  EXPECT_EQ(ev["message"], "Marking for deletion Pod " + ns_ + "/web-5");
  EXPECT_EQ(ev["source"]["component"], "taint-eviction-controller");
  EXPECT_EQ(ev["involvedObject"]["kind"], "Pod");
  EXPECT_EQ(ev["count"], 1);
}

TEST_F(writes_itest, a_service_account_without_rbac_gets_a_clear_403) {
  std::string token;
  const auto sa = service_account("nobody", token);
  ASSERT_TRUE(sa);
  ASSERT_FALSE(token.empty());

  const pod_ref pod = create_pod("web-6");
  client weak(io_.get_executor(), *sa);
  pod_writer w(weak);
  auto r = run_sync(io_, w.delete_pod(ns_, pod.name, pod.uid));
  ASSERT_TRUE(r);
  ASSERT_FALSE(*r);
  EXPECT_EQ(r->error().code, make_error_code(errc::forbidden));
  EXPECT_EQ(r->error().http_status, 403);
  EXPECT_NE(r->error().message.find("forbidden"), std::string::npos) << r->error().message;
  EXPECT_EQ(r->error().message.find(token), std::string::npos);
  EXPECT_FALSE(get_pod(pod.name)["metadata"].contains("deletionTimestamp"));
}

// Issue 11, item 3: re-evaluating an evicted pod (a retry, a new leader replaying its caches)
// leaves its condition's lastTransitionTime alone, as upstream's UpdatePodCondition does.
TEST_F(writes_itest, re_evicting_a_pod_leaves_its_condition_and_its_transition_time_alone) {
  const pod_ref pod = create_pod("web-7");
  pod_store cache;
  cache_pod(cache, pod.name);
  k8s_eviction_sink sink(io_.get_executor(), *client_, nullptr, {.pods = &cache});
  const auto first = evict(sink, pod);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, eviction_status::deleted) << first->error;
  const json* cond = nullptr;
  json live = get_pod(pod.name);
  cond = find_condition(live, "DisruptionTarget");
  ASSERT_NE(cond, nullptr) << live["status"].dump();
  const std::string transition = (*cond)["lastTransitionTime"].get<std::string>();
  cache_pod(cache, pod.name);  // the watch delivers the patched (and Terminating) pod
  ASSERT_EQ(cache.get(ns_, pod.name)->disruption, disruption_state::true_ours);

  // lastTransitionTime has a one-second resolution: let the clock move past it, so a second
  // patch would show.
  const auto moved = std::chrono::system_clock::now() + 1100ms;
  while (std::chrono::system_clock::now() < moved) {
    std::this_thread::sleep_for(100ms);
  }
  // A fresh sink (a new leader): only the cache tells it the condition is there.
  k8s_eviction_sink again(io_.get_executor(), *client_, nullptr, {.pods = &cache});
  const auto second = evict(again, pod);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, eviction_status::deleted) << second->error;
  EXPECT_EQ(again.stats().conditions_unchanged, 1U);
  EXPECT_EQ(again.stats().conditions_patched, 0U);
  live = get_pod(pod.name);
  cond = find_condition(live, "DisruptionTarget");
  ASSERT_NE(cond, nullptr);
  EXPECT_EQ((*cond)["lastTransitionTime"], transition);

  // The control: a sink without the cache re-patches, and the time moves.
  k8s_eviction_sink blind(io_.get_executor(), *client_, nullptr);
  ASSERT_TRUE(evict(blind, pod));
  EXPECT_EQ(blind.stats().conditions_patched, 1U);
  live = get_pod(pod.name);
  cond = find_condition(live, "DisruptionTarget");
  ASSERT_NE(cond, nullptr);
  EXPECT_NE((*cond)["lastTransitionTime"], transition);
}

// A DisruptionTarget=True set by another component keeps its lastTransitionTime when the
// taint manager takes it over (upstream: same status, so the old time is kept).
TEST_F(writes_itest, another_true_condition_keeps_its_transition_time) {
  const pod_ref pod = create_pod("web-8");
  const std::string then = "2020-01-02T03:04:05Z";
  request req(http::verb::patch, "/api/v1/namespaces/" + ns_ + "/pods/" + pod.name + "/status",
              json{{"status",
                    {{"conditions",
                      {{{"type", "DisruptionTarget"},
                        {"status", "True"},
                        {"reason", "PreemptionByScheduler"},
                        {"message", "preempted"},
                        {"lastTransitionTime", then}}}}}}}
                  .dump(),
              "application/strategic-merge-patch+json");
  auto patched = run_sync(io_, client_->send(std::move(req)));
  ASSERT_TRUE(patched && *patched && (*patched)->status == 200U);
  pod_store cache;
  cache_pod(cache, pod.name);
  ASSERT_EQ(cache.get(ns_, pod.name)->disruption, disruption_state::true_other);

  k8s_eviction_sink sink(io_.get_executor(), *client_, nullptr, {.pods = &cache});
  const auto got = evict(sink, pod);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::deleted) << got->error;
  const json live = get_pod(pod.name);
  const json* cond = find_condition(live, "DisruptionTarget");
  ASSERT_NE(cond, nullptr) << live["status"].dump();
  EXPECT_EQ((*cond)["reason"], "DeletionByTaintManager");
  EXPECT_EQ((*cond)["message"], "Taint manager: deleting due to NoExecute taint");
  EXPECT_EQ((*cond)["lastTransitionTime"], then);
}

// Issue 11, item 4: a permanent refusal of the condition (here RBAC without pods/status
// patch) is counted and the pod is deleted all the same.
TEST_F(writes_itest, without_pods_status_patch_the_pod_is_deleted_without_the_condition) {
  std::string token;
  const auto sa = service_account("deleter", token);
  ASSERT_TRUE(sa);
  const std::string rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns_;
  auto role =
      call(http::verb::post, rbac + "/roles",
           json{{"apiVersion", "rbac.authorization.k8s.io/v1"},
                {"kind", "Role"},
                {"metadata", {{"name", "delete-pods"}}},
                {"rules",
                 {{{"apiGroups", {""}}, {"resources", {"pods"}}, {"verbs", {"get", "delete"}}}}}});
  ASSERT_EQ(role.status, 201U) << role.body;
  auto binding = call(
      http::verb::post, rbac + "/rolebindings",
      json{{"apiVersion", "rbac.authorization.k8s.io/v1"},
           {"kind", "RoleBinding"},
           {"metadata", {{"name", "delete-pods"}}},
           {"roleRef",
            {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", "delete-pods"}}},
           {"subjects", {{{"kind", "ServiceAccount"}, {"name", "deleter"}, {"namespace", ns_}}}}});
  ASSERT_EQ(binding.status, 201U) << binding.body;

  const pod_ref pod = create_pod("web-9");
  client limited(io_.get_executor(), *sa);
  k8s_eviction_sink sink(io_.get_executor(), limited, nullptr);
  // RBAC changes reach the authorizer's cache within a moment: retry while the DELETE is
  // still refused (bounded), as the queue would.
  std::optional<eviction_result> got;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (bool first = true;; first = false) {
    if (!first) {
      std::this_thread::sleep_for(200ms);
    }
    got = evict(sink, pod);
    ASSERT_TRUE(got);
    if (got->status != eviction_status::failed || std::chrono::steady_clock::now() >= deadline) {
      break;
    }
  }
  EXPECT_EQ(got->status, eviction_status::deleted) << got->error;
  const auto st = sink.stats();
  EXPECT_GE(st.condition_failures_by_reason.at("forbidden"), 1U);
  for (const auto& [reason, n] : st.condition_failures_by_reason) {
    EXPECT_TRUE(reason == "forbidden" || n == 0) << reason << " " << n;
  }
  const json live = get_pod(pod.name);
  EXPECT_TRUE(live["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(find_condition(live, "DisruptionTarget"), nullptr) << live["status"].dump();
}

// --fresh-node-check against the real server (issue 33 item 4): the taint is removed on the
// server while the caller (the controller's cache) still believes the node tainted. The sink's
// GET of the node sees the truth: nothing is written, the attempt is `stale`. Once the node is
// tainted again, the next attempt (after the reuse window) deletes.
TEST_F(writes_itest, a_taint_removed_on_the_server_before_the_delete_saves_the_pod) {
  const std::string node = "tec-itest-fresh-" + random_suffix();
  const json taint = {{"key", "tec-itest/fresh"}, {"value", "x"}, {"effect", "NoExecute"}};
  auto made = call(http::verb::post, "/api/v1/nodes",
                   json{{"apiVersion", "v1"},
                        {"kind", "Node"},
                        {"metadata", {{"name", node}}},
                        {"spec", {{"taints", json::array({taint})}}}});
  ASSERT_EQ(made.status, 201U) << made.body;
  const auto set_taints = [&](const json& taints) {
    json live = json::parse(call(http::verb::get, "/api/v1/nodes/" + node).body);
    live["spec"]["taints"] = taints;
    const auto put = call(http::verb::put, "/api/v1/nodes/" + node, live);
    EXPECT_EQ(put.status, 200U) << put.body;
  };
  const pod_ref pod = create_pod("web-fresh");
  k8s_eviction_sink sink(io_.get_executor(), *client_, nullptr,
                         eviction_sink_options{.fresh_node_check = true,
                                               .fresh_node_window = std::chrono::milliseconds(0)});
  controller::eviction_request req{pod, {}};
  req.node = node;
  req.causes = {controller::taint{"tec-itest/fresh", "x", controller::taint_effect::no_execute}};
  const auto attempt = [&] { return evict(sink, req); };

  set_taints(json::array());  // untainted on the server; `req` still names the taint
  auto got = attempt();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::stale) << got->error;
  json live = get_pod(pod.name);
  EXPECT_FALSE(live["metadata"].contains("deletionTimestamp")) << "the pod was deleted";
  EXPECT_EQ(find_condition(live, "DisruptionTarget"), nullptr) << "a condition was written";
  EXPECT_EQ(sink.stats().fresh_node_checks.at("taint_gone"), 1U);

  set_taints(json::array({taint}));
  got = attempt();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, eviction_status::deleted) << got->error;
  live = get_pod(pod.name);
  EXPECT_TRUE(live["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(sink.stats().fresh_node_checks.at("taint_present"), 1U);
  EXPECT_EQ(sink.stats().fresh_node_reads, 2U);
  call(http::verb::delete_, "/api/v1/nodes/" + node);
}

}  // namespace
}  // namespace tec::writers
