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
// are only JSON-escaped; invalid UTF-8 becomes U+FFFD. Pure; any thread.

#include <cstddef>
#include <string>

#include "tec/base/clock.hpp"
#include "tec/controller/controller.hpp"

namespace tec::reports {

/// At most this many evictions are listed ("truncated": true and "total" say when there are
/// more). About 300 bytes each: a full list is a few MB.
inline constexpr std::size_t max_listed_evictions = 10'000;

/// The document for `list` (controller::evictions(max_listed_evictions)). `clock` maps the
/// driver's clock onto the wall clock (the due times); `generated_at` is now.
[[nodiscard]] std::string evictions_json(const controller::eviction_list& list, bool acting,
                                         const base::clock_bridge& clock,
                                         base::wall_clock::time_point generated_at);

}  // namespace tec::reports
