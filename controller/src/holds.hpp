#pragma once

#include "common.hpp"
#include "tec/controller/model.hpp"

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tec::controller::detail {

using wall_time = std::chrono::system_clock::time_point;

/// Past it a time does not fit the wall clock's nanoseconds (2262): timeAdded is clamped to
/// 2200-01-01, far past any maxHold (a later hold is refused: parse_hold).
inline constexpr std::int64_t latest_unix = latest_hold_unix;

/// `seconds` since the Unix epoch on the wall clock, clamped to [0, latest_unix].
[[nodiscard]] wall_time wall_of_unix(std::int64_t seconds);

/// What hold_book::see() makes of an object's hold-until annotation.
struct hold_verdict {
  /// When the hold in force ends (wall clock); nullopt: none (absent, ignored, or over).
  std::optional<wall_time> until;
  /// Set only the first time a distinct value is seen and ignored: why, for the Warning event
  /// and the log line ("not an RFC 3339 time", "already past when first seen").
  std::optional<std::string> ignored;
};

/// The hold-until annotations seen on one kind of object (nodes, or pods by "namespace/name"),
/// each judged once per distinct value: a malformed value, or one already past when this
/// process first sees it, is ignored for as long as the object carries that value. Bounded by
/// the objects carrying the annotation (an object seen without it, or forgotten, leaves).
/// Thread-safe: its mutex guards the table; calls are O(1) and never call out.
class hold_book {
public:
  /// `key`'s annotation is `mark` (nullopt: it has none) at wall time `now`.
  hold_verdict see(std::string_view key, const std::optional<hold_mark>& mark, wall_time now);
  /// The hold of `key` in force at `now`, as see() last recorded it; nullopt when none.
  [[nodiscard]] std::optional<wall_time> in_force(std::string_view key, wall_time now) const;
  /// `key` is gone.
  void forget(std::string_view key);
  [[nodiscard]] std::size_t size() const;

private:
  struct record {
    std::string value;
    std::int64_t until_unix = 0;
    bool ignored = false;
  };
  mutable std::mutex mu_;  // guards records_
  std::unordered_map<std::string, record, string_hash, std::equal_to<>> records_;
};

}  // namespace tec::controller::detail
