#include "tec/informers/store.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace tec::informers {
namespace {

using controller::pod_view;
using controller::taint_effect;
using controller::toleration;
using controller::toleration_operator;

std::vector<toleration> default_tolerations() {
  return {{"node.kubernetes.io/not-ready", toleration_operator::exists, "",
           taint_effect::no_execute, 300},
          {"node.kubernetes.io/unreachable", toleration_operator::exists, "",
           taint_effect::no_execute, 300}};
}

pod_record pod(const std::string& ns, const std::string& name, const std::string& node,
               const std::string& rv = "1") {
  pod_record r;
  r.pod.namespace_ = ns;
  r.pod.name = name;
  r.pod.uid = "uid-" + ns + "-" + name;
  r.pod.node_name = node;
  r.pod.tolerations = default_tolerations();
  r.pod.phase = controller::pod_phase::running;
  r.pod.owner_kind = "ReplicaSet";
  r.resource_version = rv;
  return r;
}

std::set<std::string> names_on(const pod_store& store, std::string_view node) {
  std::set<std::string> out;
  for (const auto& p : store.pods_on_node(node)) {
    out.insert(p.namespace_ + "/" + p.name);
  }
  return out;
}

TEST(pod_store, upsert_get_and_round_trip) {
  pod_store store;
  auto r = pod("shop", "web-1", "node-a", "10");
  r.pod.terminating = true;
  r.pod.mirror = true;
  r.pod.opted_out = true;
  r.pod.bound_unix = 1714564807;
  r.pod.labels = "app=web\ntier=frontend";
  r.disruption = disruption_state::true_ours;
  r.pod.tolerations.push_back(
      {"dedicated", toleration_operator::equal, "web", std::nullopt, std::nullopt});
  EXPECT_EQ(store.upsert(r), std::nullopt);
  EXPECT_EQ(store.size(), 1U);
  EXPECT_EQ(store.get("shop", "web-1"), r);
  EXPECT_EQ(store.get_pod("shop", "web-1"), r.pod);
  EXPECT_EQ(store.get_pod("shop", "web-2"), std::nullopt);
  EXPECT_EQ(store.get_pod("other", "web-1"), std::nullopt);
  EXPECT_EQ(store.pods_on_node("node-a"), std::vector<pod_view>{r.pod});
}

TEST(pod_store, keeps_the_hold_annotation_empty_and_malformed_ones_included) {
  pod_store store;
  for (const char* value : {"2023-11-14T22:14:20Z", "", "soon"}) {
    auto r = pod("shop", "web-1", "node-a", "10");
    r.pod.hold = controller::parse_hold(value);
    store.upsert(r);
    EXPECT_EQ(store.get_pod("shop", "web-1"), r.pod) << value;
  }
  auto long_value = pod("shop", "web-1", "node-a", "11");
  long_value.pod.hold = controller::parse_hold(std::string(500, 'x'));
  store.upsert(long_value);
  EXPECT_EQ(store.get_pod("shop", "web-1"), long_value.pod);
  const auto none = pod("shop", "web-1", "node-a", "12");
  store.upsert(none);
  EXPECT_EQ(store.get_pod("shop", "web-1"), none.pod);
  EXPECT_FALSE(store.get_pod("shop", "web-1")->hold);
}

TEST(pod_store, upsert_returns_the_previous_version) {
  pod_store store;
  const auto v1 = pod("ns", "p", "node-a", "1");
  auto v2 = pod("ns", "p", "node-a", "2");
  v2.pod.tolerations.clear();
  v2.pod.owner_kind.clear();
  store.upsert(v1);
  EXPECT_EQ(store.upsert(v2), v1);
  EXPECT_EQ(store.get("ns", "p"), v2);
  EXPECT_EQ(store.size(), 1U);
}

TEST(pod_store, moves_between_nodes) {
  pod_store store;
  store.upsert(pod("ns", "p", ""));
  EXPECT_TRUE(store.pods_on_node("").empty());  // unscheduled pods are not indexed
  EXPECT_TRUE(store.get_pod("ns", "p").has_value());
  store.upsert(pod("ns", "p", "node-a"));
  EXPECT_EQ(names_on(store, "node-a"), (std::set<std::string>{"ns/p"}));
  store.upsert(pod("ns", "p", "node-b"));
  EXPECT_TRUE(store.pods_on_node("node-a").empty());
  EXPECT_EQ(names_on(store, "node-b"), (std::set<std::string>{"ns/p"}));
  store.upsert(pod("ns", "p", ""));
  EXPECT_TRUE(store.pods_on_node("node-b").empty());
}

TEST(pod_store, same_name_in_different_namespaces) {
  pod_store store;
  store.upsert(pod("a", "p", "n1"));
  store.upsert(pod("b", "p", "n1"));
  store.upsert(pod("", "p", "n2"));
  EXPECT_EQ(store.size(), 3U);
  EXPECT_EQ(names_on(store, "n1"), (std::set<std::string>{"a/p", "b/p"}));
  EXPECT_EQ(store.get_pod("", "p")->node_name, "n2");
  EXPECT_EQ(store.erase("a", "p")->pod.namespace_, "a");
  EXPECT_EQ(names_on(store, "n1"), (std::set<std::string>{"b/p"}));
}

TEST(pod_store, erase) {
  pod_store store;
  const auto r = pod("ns", "p", "node-a");
  store.upsert(r);
  store.upsert(pod("ns", "q", "node-a"));
  EXPECT_EQ(store.erase("ns", "p"), r);
  EXPECT_EQ(store.erase("ns", "p"), std::nullopt);
  EXPECT_EQ(store.erase("nope", "p"), std::nullopt);
  EXPECT_EQ(names_on(store, "node-a"), (std::set<std::string>{"ns/q"}));
  EXPECT_EQ(store.erase("ns", "q")->pod.name, "q");
  EXPECT_EQ(store.size(), 0U);
  EXPECT_TRUE(store.pods_on_node("node-a").empty());
  // Pools are released: re-adding works from scratch.
  store.upsert(r);
  EXPECT_EQ(store.get("ns", "p"), r);
}

TEST(pod_store, replace_all_reports_additions_updates_and_deletions) {
  pod_store store;
  const auto keep_old = pod("ns", "keep", "node-a", "1");
  const auto gone = pod("ns", "gone", "node-a", "1");
  const auto gone_too = pod("other", "x", "node-b", "1");
  store.upsert(keep_old);
  store.upsert(gone);
  store.upsert(gone_too);

  const auto keep_new = pod("ns", "keep", "node-c", "5");
  const auto fresh = pod("ns", "fresh", "node-a", "6");
  auto result = store.replace_all({keep_new, fresh});

  ASSERT_EQ(result.upserted.size(), 2U);
  EXPECT_EQ(result.upserted[0].first, keep_old);
  EXPECT_EQ(result.upserted[0].second, keep_new);
  EXPECT_EQ(result.upserted[1].first, std::nullopt);
  EXPECT_EQ(result.upserted[1].second, fresh);
  ASSERT_EQ(result.deleted.size(), 2U);
  std::set<std::string> deleted;
  for (const auto& d : result.deleted) {
    deleted.insert(d.pod.namespace_ + "/" + d.pod.name);
  }
  EXPECT_EQ(deleted, (std::set<std::string>{"ns/gone", "other/x"}));

  EXPECT_EQ(store.size(), 2U);
  EXPECT_EQ(names_on(store, "node-a"), (std::set<std::string>{"ns/fresh"}));
  EXPECT_TRUE(store.pods_on_node("node-b").empty());
  EXPECT_EQ(names_on(store, "node-c"), (std::set<std::string>{"ns/keep"}));
  EXPECT_EQ(store.get("ns", "keep"), keep_new);
}

TEST(pod_store, relist_in_steps_reports_like_replace_all) {
  pod_store store;
  const auto keep_old = pod("ns", "keep", "node-a", "1");
  const auto same = pod("ns", "same", "node-b", "1");
  store.upsert(keep_old);
  store.upsert(same);
  store.upsert(pod("ns", "gone", "node-a", "1"));

  // An abandoned relist (the LIST failed half-way) keeps what it wrote, and its marks do not
  // carry over: "gone", named by it, is deleted by the next relist, which does not name it.
  store.relist_begin();
  store.relist_add({pod("ns", "gone", "node-a", "2")});
  EXPECT_EQ(store.get("ns", "gone"), pod("ns", "gone", "node-a", "2"));

  store.relist_begin();
  const auto keep_new = pod("ns", "keep", "node-c", "5");
  auto first = store.relist_add({keep_new});
  ASSERT_EQ(first.upserted.size(), 1U);
  EXPECT_EQ(first.upserted[0].first, keep_old);
  EXPECT_EQ(first.upserted[0].second, keep_new);
  EXPECT_TRUE(first.deleted.empty());
  const auto fresh = pod("ns", "fresh", "node-a", "6");
  auto second = store.relist_add({same, fresh});
  ASSERT_EQ(second.upserted.size(), 2U);
  EXPECT_EQ(second.upserted[0].first, same);
  EXPECT_EQ(second.upserted[1].first, std::nullopt);
  EXPECT_EQ(second.upserted[1].second, fresh);
  EXPECT_EQ(store.size(), 4U);  // nothing removed before relist_end()

  auto end = store.relist_end();
  EXPECT_TRUE(end.upserted.empty());
  ASSERT_EQ(end.deleted.size(), 1U);
  EXPECT_EQ(end.deleted[0], pod("ns", "gone", "node-a", "2"));
  EXPECT_EQ(store.size(), 3U);
  EXPECT_EQ(names_on(store, "node-a"), (std::set<std::string>{"ns/fresh"}));
  EXPECT_EQ(names_on(store, "node-c"), (std::set<std::string>{"ns/keep"}));

  // An empty relist deletes everything.
  store.relist_begin();
  EXPECT_EQ(store.relist_end().deleted.size(), 3U);
  EXPECT_EQ(store.size(), 0U);
}

TEST(pod_store, replace_all_with_empty_list_deletes_everything) {
  pod_store store;
  store.upsert(pod("ns", "a", "n"));
  store.upsert(pod("ns", "b", "n"));
  auto result = store.replace_all({});
  EXPECT_TRUE(result.upserted.empty());
  EXPECT_EQ(result.deleted.size(), 2U);
  EXPECT_EQ(store.size(), 0U);
  EXPECT_TRUE(store.pods_on_node("n").empty());
}

TEST(pod_store, list_snapshot) {
  pod_store store;
  store.upsert(pod("ns", "a", "n"));
  store.upsert(pod("ns", "b", ""));
  auto all = store.list();
  std::sort(all.begin(), all.end(),
            [](const pod_record& x, const pod_record& y) { return x.pod.name < y.pod.name; });
  ASSERT_EQ(all.size(), 2U);
  EXPECT_EQ(all[0], pod("ns", "a", "n"));
  EXPECT_EQ(all[1], pod("ns", "b", ""));
}

/// Random operations against a plain std::map model: the index by node and the pooled
/// fields must always agree with the model.
TEST(pod_store, randomised_against_a_model) {
  std::mt19937 rng(7);
  pod_store store;
  std::map<std::pair<std::string, std::string>, pod_record> model;
  const std::vector<std::string> nodes{"", "n1", "n2", "n3"};
  const std::vector<std::string> namespaces{"", "a", "b"};
  auto random_pod = [&] {
    auto r = pod(namespaces[rng() % namespaces.size()], "p" + std::to_string(rng() % 30),
                 nodes[rng() % nodes.size()], std::to_string(rng() % 1000));
    switch (rng() % 3) {
      case 0:
        r.pod.tolerations.clear();
        break;
      case 1:
        r.pod.tolerations.push_back({"k" + std::to_string(rng() % 3), toleration_operator::exists,
                                     "", std::nullopt, static_cast<std::int64_t>(rng() % 5)});
        break;
      default:
        break;
    }
    r.pod.owner_kind = rng() % 2 == 0 ? "" : "Job";
    r.pod.labels = rng() % 2 == 0 ? "" : "app=a" + std::to_string(rng() % 2);
    r.pod.bound_unix = static_cast<std::int64_t>(rng() % 3);
    r.pod.opted_out = rng() % 4 == 0;
    r.disruption = static_cast<disruption_state>(rng() % 4);
    return r;
  };
  for (int step = 0; step < 5000; ++step) {
    const unsigned op = static_cast<unsigned>(rng() % 10);
    if (op < 6) {
      auto r = random_pod();
      const auto k = std::make_pair(r.pod.namespace_, r.pod.name);
      auto it = model.find(k);
      const std::optional<pod_record> expected_old =
          it == model.end() ? std::nullopt : std::optional<pod_record>(it->second);
      ASSERT_EQ(store.upsert(r), expected_old);
      model[k] = r;
    } else if (op < 9) {
      const std::string ns = namespaces[rng() % namespaces.size()];
      const std::string name = "p" + std::to_string(rng() % 30);
      auto it = model.find({ns, name});
      const std::optional<pod_record> expected =
          it == model.end() ? std::nullopt : std::optional<pod_record>(it->second);
      ASSERT_EQ(store.erase(ns, name), expected);
      if (it != model.end()) {
        model.erase(it);
      }
    } else {
      std::vector<pod_record> fresh;
      std::map<std::pair<std::string, std::string>, pod_record> next;
      for (int i = 0; i < 10; ++i) {
        auto r = random_pod();
        next[{r.pod.namespace_, r.pod.name}] = r;
      }
      for (const auto& [k, r] : next) {
        fresh.push_back(r);
      }
      replace_result<pod_record> result;
      if (rng() % 2 == 0) {
        result = store.replace_all(fresh);
      } else {  // the same in steps of up to 3 pods
        store.relist_begin();
        for (std::size_t i = 0; i < fresh.size(); i += 3) {
          const auto last = std::min(fresh.size(), i + 3);
          store.relist_add({fresh.begin() + static_cast<std::ptrdiff_t>(i),
                            fresh.begin() + static_cast<std::ptrdiff_t>(last)});
        }
        result = store.relist_end();
      }
      std::size_t expected_deleted = 0;
      for (const auto& [k, r] : model) {
        expected_deleted += next.contains(k) ? 0U : 1U;
      }
      ASSERT_EQ(result.deleted.size(), expected_deleted);
      model = next;
    }
    ASSERT_EQ(store.size(), model.size());
    if (step % 50 == 0) {
      for (const auto& node : nodes) {
        std::set<std::string> expected;
        for (const auto& [k, r] : model) {
          if (!node.empty() && r.pod.node_name == node) {
            expected.insert(k.first + "/" + k.second);
          }
        }
        ASSERT_EQ(names_on(store, node), expected) << "node " << node << " step " << step;
      }
      for (const auto& [k, r] : model) {
        ASSERT_EQ(store.get(k.first, k.second), r);
      }
    }
  }
}

TEST(pod_store, concurrent_readers_and_a_writer) {
  pod_store store;
  std::atomic<bool> done{false};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!done.load()) {
        for (const auto& p : store.pods_on_node("n1")) {
          EXPECT_EQ(p.node_name, "n1");
          EXPECT_EQ(p.tolerations.size(), 2U);
        }
        (void)store.get_pod("ns", "p1");
        (void)store.size();
      }
    });
  }
  for (int i = 0; i < 2000; ++i) {
    const std::string name = "p" + std::to_string(i % 50);
    store.upsert(pod("ns", name, i % 2 == 0 ? "n1" : "n2"));
    if (i % 7 == 0) {
      store.erase("ns", name);
    }
    if (i % 500 == 0) {
      store.replace_all({pod("ns", "p1", "n1")});
    }
  }
  done.store(true);
  for (auto& r : readers) {
    r.join();
  }
}

node_record node(const std::string& name, std::vector<controller::taint> taints,
                 const std::string& rv = "1") {
  node_record r;
  r.node.name = name;
  r.node.taints = std::move(taints);
  r.resource_version = rv;
  return r;
}

TEST(node_store, upsert_erase_get) {
  node_store store;
  const auto n1 = node("n1", {{"k", "v", taint_effect::no_execute, 5}});
  const auto n1b = node("n1", {}, "2");
  EXPECT_EQ(store.upsert(n1), std::nullopt);
  EXPECT_EQ(store.get("n1"), n1);
  EXPECT_EQ(store.upsert(n1b), n1);
  EXPECT_EQ(store.get("n1"), n1b);
  EXPECT_EQ(store.size(), 1U);
  EXPECT_EQ(store.erase("n1"), n1b);
  EXPECT_EQ(store.erase("n1"), std::nullopt);
  EXPECT_EQ(store.get("n1"), std::nullopt);
  EXPECT_EQ(store.size(), 0U);
}

TEST(node_store, replace_all) {
  node_store store;
  const auto a = node("a", {});
  const auto b = node("b", {});
  store.upsert(a);
  store.upsert(b);
  const auto b2 = node("b", {{"k", "", taint_effect::no_schedule, 0}}, "2");
  const auto c = node("c", {});
  auto result = store.replace_all({b2, c});
  ASSERT_EQ(result.upserted.size(), 2U);
  EXPECT_EQ(result.upserted[0].first, b);
  EXPECT_EQ(result.upserted[0].second, b2);
  EXPECT_EQ(result.upserted[1].first, std::nullopt);
  ASSERT_EQ(result.deleted.size(), 1U);
  EXPECT_EQ(result.deleted[0], a);
  EXPECT_EQ(store.size(), 2U);
  EXPECT_EQ(store.list().size(), 2U);
}

}  // namespace
}  // namespace tec::informers
