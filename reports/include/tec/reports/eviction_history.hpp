#pragma once

// The eviction history: the last N eviction outcomes, kept in memory for operators ("why was my
// pod evicted at 03:12?" once its Events are gone), served as GET /debug/history and logged one
// JSON line each. The record (README "Eviction history"; a contract with the kubectl plugin's
// `explain`), field order as written:
//
//   {"pod": "ns/name", "uid": "...", "node": "node-1", "taints": ["dedicated=x:NoExecute"],
//    "toleration": {"key": "dedicated", "operator": "Equal", "value": "x",
//                   "effect": "NoExecute", "tolerationSeconds": 300} | null,
//    "scheduledAt": "...", "due": "...", "done": "...", "attempts": 1,
//    "policy": ["taint rule example.com/* raised tolerationSeconds 5 -> 60",
//               "waited 2.1s: rate_limit"],
//    "result": "deleted", "lastError": ""}
//
// and the document: {"generatedAt": "...", "capacity": 1000, "total": 1234, "records": [...]}
// (total: records made since start; records: the last `capacity` of them, oldest first,
// filtered by the query's pod= and node=). Times are UTC RFC 3339 with milliseconds. Knows
// nothing of the controller: history_record.hpp turns its outcomes into history_records. The
// daemon writes the document and the kubectl plugin reads it back through the one type below
// (history_document).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/result.hpp"

namespace tec::reports {

/// The toleration that set an eviction's time, as the record shows it.
struct history_toleration {
  std::string key;
  std::string op;  ///< "Equal", "Exists", "Lt", "Gt".
  std::string value;
  std::string effect;                   ///< "NoExecute", or "" (every effect).
  std::optional<std::int64_t> seconds;  ///< tolerationSeconds; nullopt: forever (JSON null).
};

/// One record (see the file comment for its JSON).
struct history_record {
  std::string pod;  ///< "namespace/name".
  std::string uid;
  std::string node;
  std::vector<std::string> taints;  ///< The node's NoExecute taints when it was scheduled.
  std::optional<history_toleration> toleration;  ///< nullopt: untolerated (JSON null).
  std::chrono::system_clock::time_point scheduled_at;
  std::chrono::system_clock::time_point due;
  std::chrono::system_clock::time_point done;
  std::uint32_t attempts = 0;
  std::vector<std::string> policy;  ///< Policy effects, one short line each.
  std::string result;
  std::string last_error;
};

/// The bounds of one record in memory: every string at most this many bytes (clipped on a
/// UTF-8 character boundary, control characters made spaces, base::sanitize_message), and at
/// most this many taints and policy lines (the rest dropped, the last line saying so).
inline constexpr std::size_t max_history_string = 512;
inline constexpr std::size_t max_history_list = 16;

/// `rec` within those bounds.
[[nodiscard]] history_record clipped(history_record rec);

/// The record as one compact JSON object (the log line's message, an element of "records").
/// Invalid UTF-8 becomes U+FFFD.
[[nodiscard]] std::string to_json(const history_record& rec);

/// The /debug/history document (see the file comment).
struct history_document {
  std::chrono::system_clock::time_point generated_at;
  std::size_t capacity = 0;
  std::uint64_t total = 0;
  std::vector<history_record> records;  ///< Oldest first.
};

/// The document as JSON, fields in the documented order.
[[nodiscard]] std::string to_json(const history_document& doc);

/// Reads a /debug/history body back (the plugin): an error when it is not a JSON object with a
/// "records" array. Records that are not objects are skipped; missing or mistyped fields are
/// left empty, a time that does not parse is the epoch. Times keep their milliseconds, so what
/// to_json() wrote reads back equal.
[[nodiscard]] base::result<history_document> parse_history_document(std::string_view body);

/// What GET /debug/history lists: all records, or those of one pod ("namespace/name") and/or
/// one node.
struct history_filter {
  std::string pod;
  std::string node;
};

/// The filter of a query string ("pod=ns%2Fname&node=n1", without the '?'; "" lists all).
/// An unknown parameter, a repeated one, a value longer than max_history_string or a query
/// that does not parse is an error whose message says which (for a 400).
[[nodiscard]] base::result<history_filter> parse_history_query(std::string_view query);

/// The ring of the last `capacity` records. Thread-safe (one mutex: add() copies one record
/// in, document() copies the matching records out and formats them without it). Memory: at
/// most `capacity` records, each bounded by clipped().
class eviction_history {
public:
  /// `capacity` 0 keeps nothing (add() only counts).
  explicit eviction_history(std::size_t capacity) : capacity_(capacity) {}

  /// Keeps `rec` (clipped), dropping the oldest one when full. Any thread.
  void add(history_record rec);

  [[nodiscard]] std::size_t capacity() const { return capacity_; }
  /// Records added since start (kept or not).
  [[nodiscard]] std::uint64_t total() const;
  /// The records kept now that `filter` selects, oldest first (copies).
  [[nodiscard]] std::vector<history_record> records(const history_filter& filter = {}) const;
  /// The /debug/history document (see the file comment), generated at `now`. Any thread.
  [[nodiscard]] history_document document(const history_filter& filter,
                                          std::chrono::system_clock::time_point now) const;

private:
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::deque<history_record> ring_;
  std::uint64_t total_ = 0;
};

}  // namespace tec::reports
