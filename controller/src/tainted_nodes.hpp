#pragma once

#include "common.hpp"
#include "tec/controller/controller.hpp"

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace tec::controller::detail {

/// The tainted table: the NoExecute taints of every node that has some, in one shard per
/// worker (shard_of(node, shards)). A shard is written only by the worker that handles its
/// nodes (pod_decider::node_changed on that worker's thread), under the shard's mutex for the
/// readers on other threads; that worker reads it without the lock (find_own()).
class tainted_nodes {
public:
  explicit tainted_nodes(std::size_t shards) : shards_(shards) {}

  /// The node's worker only: records its NoExecute taints (nullopt or empty: not tainted).
  void set(const std::string& node, const std::optional<std::vector<taint>>& taints) {
    shard& s = shards_[shard_of(node, shards_.size())];
    std::lock_guard lock(s.mu);
    if (!taints || taints->empty()) {
      if (s.nodes.erase(node) > 0) {
        count_.fetch_sub(1);
      }
    } else if (s.nodes.insert_or_assign(node, *taints).second) {
      count_.fetch_add(1);
    }
  }

  /// The node's worker only, without the lock: its taints, or null. Valid until that worker
  /// calls set() again.
  [[nodiscard]] const std::vector<taint>* find_own(std::string_view node) const {
    const shard& s = shards_[shard_of(node, shards_.size())];
    const auto it = s.nodes.find(node);
    return it == s.nodes.end() ? nullptr : &it->second;
  }

  /// Any thread: a copy of the node's taints; nullopt when it is not tainted.
  [[nodiscard]] std::optional<std::vector<taint>> lookup(std::string_view node) const {
    const shard& s = shards_[shard_of(node, shards_.size())];
    std::lock_guard lock(s.mu);
    const auto it = s.nodes.find(node);
    if (it == s.nodes.end()) {
      return std::nullopt;
    }
    return it->second;
  }

  /// Any thread: calls `fn(node, taints)` for each node of shard `i`, under its lock.
  void for_each_in(
      std::size_t i,
      const std::function<void(const std::string&, const std::vector<taint>&)>& fn) const {
    std::lock_guard lock(shards_[i].mu);
    for (const auto& [node, taints] : shards_[i].nodes) {
      fn(node, taints);
    }
  }

  [[nodiscard]] std::size_t shard_count() const { return shards_.size(); }
  /// Any thread: how many nodes are tainted.
  [[nodiscard]] std::size_t size() const { return count_.load(); }

private:
  struct shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, std::vector<taint>, string_hash, std::equal_to<>> nodes;
  };
  std::vector<shard> shards_;
  std::atomic<std::size_t> count_{0};  // nodes in all shards, readable without a lock
};

}  // namespace tec::controller::detail
