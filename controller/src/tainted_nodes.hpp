#pragma once

#include "common.hpp"
#include "tec/controller/controller.hpp"

#include <atomic>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tec::controller::detail {

using timedqueue::time_point;

/// The tainted table: the NoExecute taints of every node that has some, in one shard per
/// worker (shard_of(node, shards)). A shard is written only by the worker that handles its
/// nodes (pod_decider::node_changed on that worker's thread), under the shard's mutex for the
/// readers on other threads; that worker reads it without the lock (find_own()).
class tainted_nodes {
public:
  explicit tainted_nodes(std::size_t shards) : shards_(shards) {}

  /// The node's worker only: records its NoExecute taints (nullopt or empty: not tainted), and
  /// when each was first seen there: a taint it already had keeps its time, a new one gets
  /// `now` (the driver's clock; the default, its epoch, for callers that never ask).
  void set(const std::string& node, const std::optional<std::vector<taint>>& taints,
           time_point now = time_point{}) {
    shard& s = shards_[shard_of(node, shards_.size())];
    std::lock_guard lock(s.mu);
    if (!taints || taints->empty()) {
      if (s.nodes.erase(node) > 0) {
        count_.fetch_sub(1);
      }
      return;
    }
    entry next{*taints, std::vector<time_point>(taints->size(), now)};
    const auto it = s.nodes.find(node);
    if (it != s.nodes.end()) {
      const entry& old = it->second;
      for (std::size_t i = 0; i < next.taints.size(); ++i) {
        for (std::size_t j = 0; j < old.taints.size(); ++j) {
          if (same_taint(old.taints[j], next.taints[i])) {
            next.seen[i] = old.seen[j];
            break;
          }
        }
      }
      it->second = std::move(next);
    } else {
      s.nodes.emplace(node, std::move(next));
      count_.fetch_add(1);
    }
  }

  /// The node's worker only, without the lock: its taints, or null. Valid until that worker
  /// calls set() again.
  [[nodiscard]] const std::vector<taint>* find_own(std::string_view node) const {
    const shard& s = shards_[shard_of(node, shards_.size())];
    const auto it = s.nodes.find(node);
    return it == s.nodes.end() ? nullptr : &it->second.taints;
  }

  /// The node's worker only, without the lock: when taint `t` of `node` was first seen there
  /// (set()); nullopt when the node does not carry it.
  [[nodiscard]] std::optional<time_point> first_seen_own(std::string_view node,
                                                         const taint& t) const {
    const shard& s = shards_[shard_of(node, shards_.size())];
    const auto it = s.nodes.find(node);
    if (it == s.nodes.end()) {
      return std::nullopt;
    }
    const entry& e = it->second;
    for (std::size_t i = 0; i < e.taints.size(); ++i) {
      if (same_taint(e.taints[i], t)) {
        return e.seen[i];
      }
    }
    return std::nullopt;
  }

  /// Any thread: a copy of the node's taints; nullopt when it is not tainted.
  [[nodiscard]] std::optional<std::vector<taint>> lookup(std::string_view node) const {
    const shard& s = shards_[shard_of(node, shards_.size())];
    std::lock_guard lock(s.mu);
    const auto it = s.nodes.find(node);
    if (it == s.nodes.end()) {
      return std::nullopt;
    }
    return it->second.taints;
  }

  /// Any thread: calls `fn(node, taints)` for each node of shard `i`, under its lock.
  void for_each_in(
      std::size_t i,
      const std::function<void(const std::string&, const std::vector<taint>&)>& fn) const {
    std::lock_guard lock(shards_[i].mu);
    for (const auto& [node, e] : shards_[i].nodes) {
      fn(node, e.taints);
    }
  }

  [[nodiscard]] std::size_t shard_count() const { return shards_.size(); }
  /// Any thread: how many nodes are tainted.
  [[nodiscard]] std::size_t size() const { return count_.load(); }

private:
  // A node's taints and, at the same index, when each was first seen on it.
  struct entry {
    std::vector<taint> taints;
    std::vector<time_point> seen;
  };
  struct shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, entry, string_hash, std::equal_to<>> nodes;
  };
  // The same taint for its age: equal in every field (one removed and added again with a new
  // timeAdded is a new one).
  static bool same_taint(const taint& a, const taint& b) { return a == b; }
  std::vector<shard> shards_;
  std::atomic<std::size_t> count_{0};  // nodes in all shards, readable without a lock
};

}  // namespace tec::controller::detail
