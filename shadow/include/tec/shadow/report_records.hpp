#pragma once

// The records of the /debug/shadow document (docs/operations.md, "Shadow mode"), one type and
// one JSON each for the daemon that writes them and the kubectl plugin that reads them back:
//
// - "disagreements": a pod on which ours and the built-in taint manager differed,
//   {"outcome", "pod": "ns/name", "uid", "node", "taints", "ours", "theirs", "at"};
// - "builtinEvictions": the history of the built-in's evictions, every pod the tracker settled
//   as evicted by kube-controller-manager (agreed with ours or not), field order as written:
//
//   {"pod": "ns/name", "uid": "...", "node": "node-2", "taints": ["k=v:NoExecute"],
//    "deletedAt": "...", "evidence": "event: Marking for deletion Pod ns/name",
//    "oursAt": "..." | "never", "verdict": "agreed", "reason": "both evicted it within the window",
//    "settledAt": "...", "delaySeconds": 0.04, "early": false}
//
// Times are UTC RFC 3339 with milliseconds, when our watches saw things. Reading back is
// lenient: a missing field, or one of another type, stays empty (or 0, false); never throws.
// Pure; builtin_eviction_log is not thread-safe (the tracker holds its lock around it).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tec/base/result.hpp"

namespace tec::shadow {

/// One pod on which ours and the built-in differed.
struct disagreement {
  std::string outcome;  ///< to_string(shadow_outcome): only_them or only_us.
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string node;
  std::vector<std::string> taints;  ///< describe_taint() of each NoExecute taint.
  std::string ours;    ///< "none", "would delete at T", "scheduled for T", "cancelled at T (why)".
  std::string theirs;  ///< "deleted at T (event: ...)", "deleted at T (condition: ...)", "none".
  std::string at;      ///< When it was settled.

  friend bool operator==(const disagreement&, const disagreement&) = default;
};

/// One eviction of the built-in taint manager, as the tracker settled it.
struct builtin_eviction {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string node;
  std::vector<std::string> taints;  ///< describe_taint() of each NoExecute taint.
  /// Their deletion: when its deletionTimestamp was first seen (or the pod gone without one).
  std::string deleted_at;
  /// What proves it theirs: "event: MESSAGE" or "condition: DisruptionTarget
  /// DeletionByTaintManager".
  std::string evidence;
  std::string ours_at;       ///< When ours would have deleted it, or "never".
  std::string verdict;       ///< to_string(shadow_outcome): agreed, only_them or only_us.
  std::string reason;        ///< Why that verdict, a few words.
  double delay_seconds = 0;  ///< agreed: |their time - ours|; else 0.
  std::string settled_at;
  bool early = false;  ///< Settled early, as a best guess (the pending bound).

  friend bool operator==(const builtin_eviction&, const builtin_eviction&) = default;
};

/// The record as its JSON object (see the file comment).
[[nodiscard]] nlohmann::ordered_json to_json(const disagreement& d);
[[nodiscard]] nlohmann::ordered_json to_json(const builtin_eviction& e);

/// The record back from its JSON object (lenient, see the file comment).
[[nodiscard]] disagreement disagreement_from_json(const nlohmann::json& j);
[[nodiscard]] builtin_eviction builtin_eviction_from_json(const nlohmann::json& j);

/// How the comparison stands: each outcome's count, the open pods, the agreed evictions' delay.
struct shadow_counts {
  std::uint64_t agreed = 0;
  std::uint64_t only_them = 0;
  std::uint64_t only_us = 0;
  std::uint64_t cancelled_both = 0;
  std::uint64_t ambiguous = 0;
  std::uint64_t settled_early = 0;  ///< Settled before their time by the pending bound.
  /// Our would-delete pods deleted by someone else (no evidence of theirs) before the window
  /// after our decision ended: not compared (neither agreed nor only_us).
  std::uint64_t deleted_by_others = 0;
  /// Records of the built-in's history dropped to keep its bound (max_builtin_evictions).
  std::uint64_t builtin_evictions_dropped = 0;
  std::size_t pending = 0;
  double agreed_delay_max = 0;
  double agreed_delay_sum = 0;
};

/// The whole /debug/shadow document, one type for the daemon that writes it
/// (shadow_tracker::report_json()) and the kubectl plugin that reads it back (`shadow`):
///
///   {"windowSeconds": 30, "counts": {"agreed", "onlyThem", "onlyUs", "cancelledBoth",
///    "ambiguous", "deletedByOthers", "pending"}, "settledEarly",
///    "agreedDelaySeconds": {"max", "mean"}, "disagreements": [...], "builtinEvictions": [...],
///    "builtinEvictionsDropped"}
struct shadow_document {
  double window_seconds = 0;  ///< A whole number is written as one.
  /// agreed_delay_sum is written as the mean ("agreedDelaySeconds.mean") and read back as
  /// mean x agreed.
  shadow_counts counts;
  std::vector<disagreement> disagreements;
  std::vector<builtin_eviction> builtin_evictions;
  /// Reading: false when the body has no "builtinEvictions" (a controller older than them).
  bool history_served = true;
};

/// The document's summary (every field but the two lists), in the documented order.
[[nodiscard]] nlohmann::ordered_json summary_json(const shadow_document& doc);
/// The document's JSON text (invalid UTF-8 replaced, never thrown).
[[nodiscard]] std::string to_json(const shadow_document& doc);
/// Reads a body back (lenient, as the records); an error when it is not a JSON object with a
/// "counts" object and a "disagreements" array.
[[nodiscard]] base::result<shadow_document> parse_shadow_document(std::string_view body);

/// The latest `capacity` built-in evictions: beyond it the oldest is dropped and counted.
class builtin_eviction_log {
public:
  explicit builtin_eviction_log(std::size_t capacity) : capacity_(capacity) {}

  /// Keeps `e`, dropping the oldest record when full (capacity 0 keeps nothing).
  void add(builtin_eviction e);
  /// The records kept, oldest first.
  [[nodiscard]] const std::deque<builtin_eviction>& records() const { return records_; }
  /// Records dropped so far to keep the bound.
  [[nodiscard]] std::uint64_t dropped() const { return dropped_; }

private:
  std::size_t capacity_;
  std::deque<builtin_eviction> records_;
  std::uint64_t dropped_ = 0;
};

}  // namespace tec::shadow
