#pragma once

// The informers' caches. pod_store is the controller's pod_index (pods by namespace/name and
// by spec.nodeName); node_store keeps nodes by name. Both are written by one informer and
// read concurrently by the controller's workers.
//
// Writes apply in call order: resourceVersion is stored but never compared (the API server's
// watch order is the truth; resourceVersions are opaque strings). Every read returns copies,
// so no lock outlives a call.

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tec/controller/ports.hpp"
#include "tec/informers/records.hpp"

namespace tec::informers {

/// What a relist changed: every object of the new list with its previous version (nullopt
/// when it is new), and the objects that vanished (to be delivered as deletions).
template <class Record>
struct replace_result {
  std::vector<std::pair<std::optional<Record>, Record>> upserted;
  std::vector<Record> deleted;
};

/// A hash for maps keyed by std::string that are searched with a std::string_view.
struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

/// Pods by namespace/name with an index by node name.
///
/// Thread-safe: writers take an exclusive lock, readers (pods_on_node, get_pod, get, list,
/// size) a shared one. Memory: strings that repeat across pods (namespaces, node names, owner
/// kinds, whole toleration lists such as the two DefaultTolerationSeconds ones) are stored once
/// and reference-counted, so a cached pod costs about 200-250 bytes (see k8sclient_bench).
class pod_store final : public controller::pod_index {
public:
  pod_store();
  ~pod_store() override;
  pod_store(const pod_store&) = delete;
  pod_store& operator=(const pod_store&) = delete;

  /// Inserts or replaces the pod with the record's namespace/name; returns the previous
  /// version, if any (for an (old, new) update handler call).
  std::optional<pod_record> upsert(const pod_record& record);

  /// Removes the pod; returns what was cached, if anything.
  std::optional<pod_record> erase(std::string_view namespace_, std::string_view name);
  /// The same, by the record's namespace/name (what a reflector's store offers).
  std::optional<pod_record> erase(const pod_record& record) {
    return erase(record.pod.namespace_, record.pod.name);
  }

  /// Makes the cache exactly `records` (a relist), atomically for readers. Pods missing from
  /// `records` are removed and returned as deletions. `records` are moved into the result.
  replace_result<pod_record> replace_all(std::vector<pod_record> records);

  /// replace_all() in steps, for a LIST too big to hold whole (at 50,000 pods, the decoded list
  /// and replace_all's result outweigh the cache): relist_begin(), relist_add() with the listed
  /// pods in batches as they are decoded (each returns its batch's (old, new) pairs in
  /// `upserted`), then relist_end(), which removes the pods no batch named and returns them in
  /// `deleted`. Readers see the batches land one by one. A relist abandoned half-way (the LIST
  /// failed) leaves what its batches wrote; the next relist_begin() starts afresh.
  void relist_begin();
  replace_result<pod_record> relist_add(std::vector<pod_record> batch);
  replace_result<pod_record> relist_end();

  /// The cached pod with its resourceVersion.
  [[nodiscard]] std::optional<pod_record> get(std::string_view namespace_,
                                              std::string_view name) const;

  /// Every cached pod (a snapshot).
  [[nodiscard]] std::vector<pod_record> list() const;

  [[nodiscard]] std::size_t size() const;

  // controller::pod_index
  [[nodiscard]] std::vector<controller::pod_view> pods_on_node(
      std::string_view node) const override;
  [[nodiscard]] std::optional<controller::pod_view> get_pod(std::string_view namespace_,
                                                            std::string_view name) const override;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Nodes by name. Thread-safe like pod_store (shared_mutex; reads return copies).
class node_store {
public:
  node_store() = default;
  node_store(const node_store&) = delete;
  node_store& operator=(const node_store&) = delete;

  /// Inserts or replaces the node; returns the previous version, if any.
  std::optional<node_record> upsert(const node_record& record);

  /// Removes the node; returns what was cached, if anything.
  std::optional<node_record> erase(std::string_view name);
  /// The same, by the record's name (what a reflector's store offers).
  std::optional<node_record> erase(const node_record& record) { return erase(record.node.name); }

  /// Makes the cache exactly `records`; nodes missing from it are returned as deletions.
  replace_result<node_record> replace_all(std::vector<node_record> records);

  [[nodiscard]] std::optional<node_record> get(std::string_view name) const;
  [[nodiscard]] std::vector<node_record> list() const;
  [[nodiscard]] std::size_t size() const;

private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, node_record, string_hash, std::equal_to<>> nodes_;
};

}  // namespace tec::informers
