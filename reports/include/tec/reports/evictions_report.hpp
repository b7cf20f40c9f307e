#pragma once

// GET /debug/evictions on the metrics port: every eviction the controller's timed queue holds
// (controller::evictions()), as one JSON document, in due order:
//
//   {"generatedAt": "2026-11-23T15:35:00.000Z", "acting": true, "total": 1, "truncated": false,
//    "evictions": [{"pod": "ns/name", "uid": "...", "node": "node-1",
//                   "taints": ["node.kubernetes.io/unreachable:NoExecute"],
//                   "due": "2026-11-23T15:40:00.000Z", "state": "pending", "why": "",
//                   "attempts": 0, "lastError": ""}]}
//
// "acting": whether this replica acts (it leads and its caches are synced); a standby lists
// nothing. Times are UTC RFC 3339 with milliseconds. Strings from the API (an error message)
// are only JSON-escaped; invalid UTF-8 becomes U+FFFD. The daemon writes it and the kubectl
// plugin reads it through the one type below (evictions_document). Pure; any thread.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/result.hpp"

#include "tec/base/clock.hpp"
#include "tec/controller/controller.hpp"

namespace tec::reports {

/// At most this many evictions are listed ("truncated": true and "total" say when there are
/// more). About 300 bytes each: a full list is a few MB.
inline constexpr std::size_t max_listed_evictions = 10'000;

/// One eviction of the document (its JSON field in the comment).
struct eviction_entry {
  std::string pod;                  ///< "pod": "namespace/name".
  std::string uid;                  ///< "uid".
  std::string node;                 ///< "node".
  std::vector<std::string> taints;  ///< "taints": the node's NoExecute taints, "key=value:Effect".
  std::string due;                  ///< "due": RFC 3339, milliseconds, UTC.
  std::string state;                ///< "state": pending, waiting, running, retrying.
  std::string why;                  ///< "why": what a waiting eviction waits for.
  std::int64_t attempts = 0;        ///< "attempts".
  std::string last_error;           ///< "lastError".
  /// Evict mode, once the Eviction API refused it: "blockedSince", and "fallbackAt" (when it is
  /// deleted anyway; null: never). Both absent otherwise.
  std::optional<std::string> blocked_since;
  std::optional<std::string> fallback_at;

  friend bool operator==(const eviction_entry&, const eviction_entry&) = default;
};

/// The whole document.
struct evictions_document {
  std::string generated_at;  ///< "generatedAt".
  bool acting = false;       ///< "acting".
  std::size_t total = 0;     ///< "total": the evictions queued, listed or not.
  bool truncated = false;    ///< "truncated": more than max_listed_evictions.
  std::vector<eviction_entry> evictions;

  friend bool operator==(const evictions_document&, const evictions_document&) = default;
};

/// The document of `list` (controller::evictions(max_listed_evictions)). `clock` maps the
/// driver's clock onto the wall clock (the due times); `generated_at` is now.
[[nodiscard]] evictions_document evictions_document_of(const controller::eviction_list& list,
                                                       bool acting, const base::clock_bridge& clock,
                                                       base::wall_clock::time_point generated_at);

/// The JSON text, fields in the documented order.
[[nodiscard]] std::string to_json(const evictions_document& doc);
/// One entry's JSON object, as the document lists it (the plugin prints entries alone).
[[nodiscard]] std::string to_json(const eviction_entry& e);
/// The namespace and the name of an entry's "pod" ("namespace/name"; no slash: "" and pod).
[[nodiscard]] std::string_view namespace_of(const eviction_entry& e);
[[nodiscard]] std::string_view name_of(const eviction_entry& e);

/// Reads a body back (the plugin): an error when it is not a JSON object with an "evictions"
/// array; entries that are not objects are skipped, missing or mistyped fields left empty.
[[nodiscard]] base::result<evictions_document> parse_evictions_document(std::string_view body);

/// to_json(evictions_document_of(...)).
[[nodiscard]] std::string evictions_json(const controller::eviction_list& list, bool acting,
                                         const base::clock_bridge& clock,
                                         base::wall_clock::time_point generated_at);

}  // namespace tec::reports
