#pragma once

// The namespaces, for the opt-out annotation (taint-eviction-controller/exclude: "true", see
// controller::opt_out_annotation): a LIST and WATCH of /api/v1/namespaces decoded into compact
// records (name, resourceVersion, whether the namespace opts out), a namespace_store the
// controller asks whether a namespace opts out, and the namespace_informer type.
//
// Decoding: nlohmann's DOM parser (a cluster has few namespaces, each small), depth-limited;
// malformed JSON is errc::malformed_json, valid JSON of the wrong shape (a missing or non-string
// metadata.name, annotations that are not an object, a non-string value of the opt-out
// annotation) is errc::unexpected_shape with the JSON path, which the reflector skips and counts.
// Only the exact value "true" opts out. Pure and thread-safe; never throws for bad input.

#include <cstddef>
#include <functional>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tec/base/result.hpp"
#include "tec/informers/decode.hpp"
#include "tec/informers/object_codec.hpp"
#include "tec/informers/store.hpp"
#include "tec/k8sclient/reflector.hpp"
#include "tec/k8sclient/watch.hpp"

namespace tec::informers {

/// A namespace as cached: all the controller reads of it.
struct namespace_record {
  std::string name;
  std::string resource_version;
  /// metadata.annotations["taint-eviction-controller/exclude"] == "true".
  bool opted_out = false;

  friend bool operator==(const namespace_record&, const namespace_record&) = default;
};

using namespace_event = watch_event<namespace_record>;

/// One Namespace object.
result<namespace_record> decode_namespace(std::string_view json);
/// One watch event line of a namespace watch. BOOKMARK carries only the resourceVersion.
result<namespace_event> decode_namespace_event(std::string_view line);
/// A NamespaceList page (items decoded too).
result<list_page<namespace_record>> decode_namespace_list(std::string_view body);

/// The reflector's codec: /api/v1/namespaces.
struct namespace_codec : object_codec<namespace_record, &decode_namespace, &decode_namespace_event,
                                      &decode_namespace_list> {
  static constexpr const char* path = "/api/v1/namespaces";
  static constexpr const char* kind = "namespaces";
};

/// A namespace whose answer to opted_out() changed.
struct opt_out_change {
  std::string namespace_;
  bool opted_out = false;  ///< The new answer.

  friend bool operator==(const opt_out_change&, const opt_out_change&) = default;
};

/// The namespaces by name, and which of them opt out.
///
/// Thread-safe: the informer writes (upsert, erase, replace_all) on its executor while the
/// controller's workers call opted_out() concurrently (a shared lock; no lock outlives a call).
/// `on_change` is called by the writer after its write, outside the lock, once per write that
/// changed at least one namespace's answer, with every such change (a relist's are coalesced
/// into one call): an annotation added or removed, a namespace that opts out created or
/// deleted. It must be quick and must not call back into the store's writers.
class namespace_store {
public:
  using change_handler = std::function<void(const std::vector<opt_out_change>& changes)>;

  explicit namespace_store(change_handler on_change = {});
  namespace_store(const namespace_store&) = delete;
  namespace_store& operator=(const namespace_store&) = delete;

  /// Inserts or replaces the namespace; returns the previous version, if any.
  std::optional<namespace_record> upsert(const namespace_record& record);
  /// Removes the namespace; returns what was cached, if anything.
  std::optional<namespace_record> erase(const namespace_record& record);
  /// Makes the cache exactly `records`; namespaces missing from it are returned as deletions.
  replace_result<namespace_record> replace_all(std::vector<namespace_record> records);

  /// True when the namespace is cached and carries the opt-out annotation. Any thread.
  [[nodiscard]] bool opted_out(std::string_view namespace_) const;
  /// The namespaces that opt out, sorted (logs and tests).
  [[nodiscard]] std::vector<std::string> opted_out_namespaces() const;
  [[nodiscard]] std::size_t size() const;

private:
  void notify(const std::vector<opt_out_change>& changes) const;

  change_handler on_change_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, namespace_record, string_hash, std::equal_to<>> namespaces_;
};

using namespace_informer = k8sclient::reflector<namespace_codec, namespace_store>;

}  // namespace tec::informers

extern template class tec::k8sclient::reflector<tec::informers::namespace_codec,
                                                tec::informers::namespace_store>;
